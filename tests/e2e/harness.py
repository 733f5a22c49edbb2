"""harness.py -- the end-to-end tests' shared plumbing, one module per job,
gathered under one name so that a test imports what it needs from here:

  proc.py     processes (registered, stopped by PID), temporary files, the
              TAP reporter with its closing sanitizer check, ringproxy
  caches.py   test caches, their bodies, configs
  client.py   http.client requests and the raw HTTP/1.1 reader
  fakes.py    scripted fake backends
  load.py     bounded client load

Standard library only."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from proc import *  # noqa: E402,F401,F403
from proc import _procs  # noqa: E402,F401
from caches import *  # noqa: E402,F401,F403
from client import *  # noqa: E402,F401,F403
from fakes import *  # noqa: E402,F401,F403
from load import *  # noqa: E402,F401,F403
import http  # noqa: E402,F401  (harness.http.client in tests)
