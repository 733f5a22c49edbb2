// tests/cachetests/score.mjs -- scores one run of the HTTP cache test suite
// (the npm package http-cache-tests, the suite behind cache-tests.fyi) with
// the suite's own result rules and prints ringproxy's row beside the rows
// the package publishes for other caches.
//
// Usage: node score.mjs SUITE RESULTS NAME [--json OUT] [--expect FILE]
//   SUITE    the installed package (.../node_modules/http-cache-tests)
//   RESULTS  the JSON its client printed (npm run cli), test id -> result
//   NAME     the first column of this run's row
//   --json   also write every test of this run, its kind, dependencies,
//            outcome and reason, to OUT
//   --expect the required failures and setup failures this build is known
//            to have, one "ID OUTCOME: why" a line (expected.txt): then
//            the exit status is 0 when the failures are exactly those (a
//            listed test that passes now fails the run too, so that the
//            list is kept true)
// Exit status: 0 when no required test failed and the harness ran every
// test (or, with --expect, when the failures are the expected ones); 1
// otherwise; 2 on bad input.
//
// The rules are the package's lib/display.mjs, determineTestResult()
// (0.4.5), reproduced here because that module imports browser-only assets
// (marked, the Liquid browser build) and cannot be loaded by node:
//   - no result for the test: untested ("-")
//   - any test in depends_on (transitively, by the same rules) not "pass"
//     or "yes": dependency failed (here "not reached"), whatever the kind
//   - a result ["Setup", "retry"]: the cache retried a request; any other
//     ["Setup", ...]: setup failure
//   - a result that is exactly false: harness failure
//   - kind "required" or no kind: true passes, anything else fails (⛔)
//   - kind "optimal": true passes, anything else is an optional failure (⚠)
//   - kind "check": true is "yes", anything else "no"
// The tests are the suite index.html shows: tests/index.mjs plus
// tests/surrogate-control.mjs (cli.mjs runs the same set).

import fs from 'fs'
import path from 'path'
import { pathToFileURL } from 'url'

const PASSING = new Set(['pass', 'yes'])

// outcome -> the table's column; check results have no column
const COLUMN = {
  'required pass': 'required pass',
  'required fail': 'required fail',
  'optimal pass': 'optimal pass',
  'optimal fail': 'optimal fail',
  'not reached': 'not reached',
  setup: 'setup / retry / harness',
  retry: 'setup / retry / harness',
  harness: 'setup / retry / harness'
}
const COLUMNS = ['required pass', 'required fail', 'optimal pass', 'optimal fail',
  'not reached', 'setup / retry / harness']

function usage (msg) {
  console.error(`score.mjs: ${msg}\nusage: node score.mjs SUITE RESULTS NAME [--json OUT] [--expect FILE]`)
  process.exit(2)
}

async function loadSuite (dir) {
  const base = (await import(pathToFileURL(path.join(dir, 'tests/index.mjs')))).default
  const surrogate = (await import(pathToFileURL(path.join(dir, 'tests/surrogate-control.mjs')))).default
  const tests = new Map()
  for (const suite of [...base, surrogate]) {
    for (const t of suite.tests) tests.set(t.id, { ...t, suite: suite.id })
  }
  return tests
}

// lib/display.mjs determineTestResult(), as the table counts it: the
// display's result type, with pass split by kind (pass of a required test
// or of an optimal one).
function outcome (tests, results, id, memo) {
  if (memo.has(id)) return memo.get(id)
  const test = tests.get(id)
  if (test === undefined) throw new Error(`dependency ${id} is not a test of the suite`)
  const result = results[id]
  let o
  if (result === undefined) {
    o = 'untested'
  } else if ((test.depends_on || []).some(d => !PASSING.has(basic(outcome(tests, results, d, memo))))) {
    o = 'not reached'
  } else if (Array.isArray(result) && result[0] === 'Setup') {
    o = result[1] === 'retry' ? 'retry' : 'setup'
  } else if (result === false) {
    o = 'harness'
  } else if (test.kind === 'required' || test.kind === undefined) {
    o = result === true ? 'required pass' : 'required fail'
  } else if (test.kind === 'optimal') {
    o = result === true ? 'optimal pass' : 'optimal fail'
  } else if (test.kind === 'check') {
    o = result === true ? 'yes' : 'no'
  } else {
    throw new Error(`test ${id}: unknown kind ${test.kind}`)
  }
  memo.set(id, o)
  return o
}

// the display's own name for an outcome: pass of either kind is "pass"
function basic (o) {
  return o === 'required pass' || o === 'optimal pass' ? 'pass' : o
}

// The tests that keep id from being reached: its failed dependencies, and
// for a dependency that was itself not reached, that one's, down to tests
// that ran and did not pass.
function blockers (tests, results, id, memo, seen = new Set()) {
  const roots = []
  for (const d of tests.get(id).depends_on || []) {
    if (seen.has(d)) continue
    seen.add(d)
    const o = outcome(tests, results, d, memo)
    if (PASSING.has(basic(o))) continue
    if (o === 'not reached') roots.push(...blockers(tests, results, d, memo, seen))
    else roots.push(d)
  }
  return roots
}

function score (tests, results) {
  const memo = new Map()
  const counts = Object.fromEntries(COLUMNS.map(c => [c, 0]))
  const rows = []
  for (const [id, test] of tests) {
    const o = outcome(tests, results, id, memo)
    if (COLUMN[o]) counts[COLUMN[o]]++
    const r = results[id]
    rows.push({
      id,
      suite: test.suite,
      name: test.name,
      kind: test.kind || 'required',
      depends_on: test.depends_on || [],
      outcome: o,
      reason: Array.isArray(r) ? r.slice(0, 2).join(': ') : null,
      blocked_by: o === 'not reached' ? blockers(tests, results, id, memo) : []
    })
  }
  return { counts, rows }
}

function tableRow (name, counts) {
  return `| ${name} | ${COLUMNS.map(c => counts[c]).join(' | ')} |`
}

async function main () {
  const args = process.argv.slice(2)
  let jsonOut = null
  const j = args.indexOf('--json')
  if (j >= 0) {
    jsonOut = args[j + 1]
    if (!jsonOut) usage('--json needs a file')
    args.splice(j, 2)
  }
  let expectFile = null
  const x = args.indexOf('--expect')
  if (x >= 0) {
    expectFile = args[x + 1]
    if (!expectFile) usage('--expect needs a file')
    args.splice(x, 2)
  }
  if (args.length !== 3) usage('three arguments expected')
  const [suiteDir, resultsFile, name] = args

  const tests = await loadSuite(suiteDir)
  let results
  try {
    results = JSON.parse(fs.readFileSync(resultsFile, 'utf8'))
  } catch (e) {
    usage(`${resultsFile}: not the client's JSON (${e.message})`)
  }
  const ran = Object.keys(results).filter(id => tests.has(id)).length
  if (ran === 0) usage(`${resultsFile}: no result for any test of the suite`)

  const mine = score(tests, results)
  const pkg = JSON.parse(fs.readFileSync(path.join(suiteDir, 'package.json'), 'utf8'))
  const index = (await import(pathToFileURL(path.join(suiteDir, 'results/index.mjs')))).default

  console.log(`Scored with the rules of http-cache-tests ${pkg.version} (lib/display.mjs), ` +
    `${tests.size} tests, ${ran} run here:\n`)
  console.log(`| cache | ${COLUMNS.join(' | ')} |`)
  console.log(`|---|${COLUMNS.map(() => '---:').join('|')}|`)
  console.log(tableRow(name, mine.counts))
  for (const item of index) {
    if (item.type === 'browser') continue
    const published = JSON.parse(fs.readFileSync(path.join(suiteDir, 'results', item.file), 'utf8'))
    console.log(tableRow(`${item.name} ${item.version} (published)`, score(tests, published).counts))
  }

  const failed = mine.rows.filter(r => r.outcome === 'required fail')
  const broken = mine.rows.filter(r => ['setup', 'retry', 'harness'].includes(r.outcome))
  const notReached = mine.rows.filter(r => r.outcome === 'not reached')
  console.log(`\nRequired failures (${failed.length}):`)
  for (const r of failed) console.log(`- ${r.id}: ${r.reason}`)
  if (broken.length) {
    console.log(`\nSetup failures, retries, harness failures (${broken.length}):`)
    for (const r of broken) console.log(`- ${r.id} (${r.outcome}): ${r.reason}`)
  }
  const byRoot = new Map()
  for (const r of notReached) {
    for (const b of new Set(r.blocked_by)) byRoot.set(b, (byRoot.get(b) || 0) + 1)
  }
  console.log(`\nNot reached (${notReached.length}), by the failed test they depend on ` +
    '(a test that depends on two counts under both):')
  for (const [b, n] of [...byRoot].sort((x, y) => y[1] - x[1] || (x[0] < y[0] ? -1 : 1))) {
    const o = mine.rows.find(r => r.id === b)
    console.log(`- ${b} (${o.kind}, ${o.outcome}): ${n}`)
  }

  if (jsonOut) {
    fs.writeFileSync(jsonOut, JSON.stringify({
      suite: `http-cache-tests@${pkg.version}`,
      name,
      counts: mine.counts,
      tests: mine.rows
    }, null, 2) + '\n')
  }
  if (expectFile) process.exit(compareExpected(expectFile, [...failed, ...broken], mine.rows))
  process.exit(failed.length || broken.length ? 1 : 0)
}

// The run against the known failures of expectFile: 0 when they are the
// same tests with the same outcomes, else 1 (each difference printed).
function compareExpected (expectFile, bad, rows) {
  const want = new Map()
  const lines = fs.readFileSync(expectFile, 'utf8').split('\n')
  for (const [i, line] of lines.entries()) {
    const l = line.trim()
    if (!l || l.startsWith('#')) continue
    const m = /^(\S+) (required fail|setup|retry|harness):/.exec(l)
    if (!m) usage(`${expectFile}:${i + 1}: not "ID OUTCOME: why"`)
    want.set(m[1], m[2])
  }
  const diffs = []
  for (const r of bad) {
    if (want.get(r.id) !== r.outcome) diffs.push(`- ${r.id}: ${r.outcome}, not expected (${r.reason})`)
  }
  for (const [id, outcome] of want) {
    const r = rows.find(r => r.id === id)
    if (!r || r.outcome !== outcome) {
      diffs.push(`- ${id}: expected ${outcome}, now ${r ? r.outcome : 'not run'}: ` +
        `update ${path.basename(expectFile)}`)
    }
  }
  console.log(`\nAgainst ${expectFile} (${want.size} known): ` +
    (diffs.length ? `${diffs.length} difference(s):` : 'the same'))
  for (const d of diffs) console.log(d)
  return diffs.length ? 1 : 0
}

main().catch(e => {
  console.error(`score.mjs: ${e.stack || e}`)
  process.exit(2)
})
