/*
 * h2.c -- HTTP/2 on the client side (RFC 9113), on its worker's thread.
 *
 * A connection the client side hands over (front.c, at the preface of h2c
 * prior knowledge; the TLS layer, at ALPN h2) is served by an nghttp2
 * server session that this file drives from the worker's event loop on
 * the connection's own socket: bytes read go to nghttp2_session_mem_recv,
 * frames it makes come from nghttp2_session_mem_send into one output
 * queue written by one flush call. All socket I/O goes through
 * h2_io_recv and h2_io_flush, whose conventions are conn_recv's and
 * conn_flush's (conn.h): on HTTPS they are tls_recv and tls_flush
 * (tls.c), with two differences the TLS layer brings. Bytes OpenSSL has
 * decrypted but we have not read raise no socket event, so a read that
 * leaves some (a record larger than our buffer) runs the read event again;
 * and the connection's session is freed (close_notify sent once) where
 * the socket is closed.
 *
 * Each stream is a request (request.h), the same object an HTTP/1.1
 * request is, through this file's req_client_ops: the stream's HEADERS
 * become an HTTP/1.1 head in the stream's own read buffer (":authority"
 * the Host, ":path" the target, cookie crumbs joined with "; ", RFC 9113
 * 8.3.1 and 8.2.3), parsed by http1.c like any client's, and its DATA the
 * body after it (chunked when no content-length came). So the key, the
 * cache, coalescing, Vary, the walk, bounded loads, retries, the access
 * log and the stats are one code path for both protocols. A backend's
 * response head comes as parsed fields (req_client_ops.head, the same
 * fields the HTTP/1.1 writer writes) and becomes HEADERS; one the request
 * queues in HTTP/1.1 form in the stream's output queue (a hit, the
 * proxy's own answer) is parsed there first, its hop-by-hop fields left
 * out. The body queued after it becomes DATA frames whose payload is sent from where it lies (NGHTTP2_DATA_FLAG_NO_COPY:
 * the cached object the request holds a reference to, or the backend's
 * buffer), decoded first when it was chunked. The request hears that its
 * bytes are out (req_client_drained) only once the socket took them, so
 * a backend is read no faster than the client's window drains, and
 * nothing is buffered without bound.
 *
 * Limits on top of nghttp2 1.52 (which sends RST_STREAM PROTOCOL_ERROR
 * itself for what RFC 9113 8.2 forbids: uppercase names, connection
 * fields, te other than trailers, a content-length that disagrees with
 * the DATA): SETTINGS first ([h2] max_concurrent_streams, initial_window,
 * max_head_size as the header list size); a stream keeps its place until
 * its request has let go, and a HEADERS beyond the places is refused
 * (REFUSED_STREAM) and the socket not read while all are taken; header
 * fields and bytes (+32 each, RFC 7541 4.1) past max_headers /
 * max_head_size get 431; frames that do no work count as glitches, GOAWAY
 * ENHANCE_YOUR_CALM past [h2] max_glitches in a window; resets of
 * requests under way past max_concurrent_streams likewise (Rapid Reset);
 * a stream whose response the client's window holds back for [h2]
 * send_timeout is reset; [h2] max_requests then a graceful GOAWAY; an
 * idle connection closes after [h2] idle_timeout.
 *
 * Lifetime: a stream lives from its HEADERS until nghttp2 closed it, its
 * request has ended (req_end, and a posted wake-up it waited for came),
 * and no byte of it is still in the output queue. A connection lives
 * until it is closed and its last stream is gone; the struct client it
 * came on is given back with it.
 */
#include "path/h2.h"

#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/deadline.h"
#include "base/freelist.h"
#include "base/log.h"
#include "backend/snapshot.h"
#include "config/conf.h"
#include "http/http1.h"
#include "path/conn.h"
#include "path/forward.h"
#include "path/proxy-t.h"
#include "path/request.h"
#include "path/tls.h"
#include "path/worker.h"

/* The read buffer of a connection: one read a turn. */
#define H2_RBUF (16 * 1024)
/* A response head, and its fields as nghttp2's, on the stack up to these
 * (larger ones are allocated). */
#define H2_HEAD_STACK 2048
#define H2_NV_STACK 48
/* A DATA frame's payload up to this is copied into the output buffer
 * (h2_send_data); larger ones go from where they lie. */
#define H2_COPY_MAX 8192
/* The output buffer that frames from nghttp2 are copied into (payloads
 * sent without a copy are not in it); frames are made while this much is
 * free, more than the largest frame nghttp2 makes at once (a frame of
 * the default 16 KiB SETTINGS_MAX_FRAME_SIZE, which we advertise, and its
 * header). */
#define H2_WBUF (64 * 1024)
#define H2_FRAME_ROOM (16384 + 64)
/* Output slices kept free for one DATA frame's payload. */
#define H2_FRAME_SLICES 40
/* A stream's buffers start this small (a browser's request head is a
 * few hundred bytes, its generated response lines fewer) and grow to
 * what its request needs, up to the limits ([proxy] max_head_size); a
 * stream kept for reuse keeps what it grew to. Sized for the largest
 * request they have to take, 100 streams of a connection held 5 MB. */
#define H2_BUF_START 1024
/* Body slices a stream holds ready (decoded from its output queue). */
#define H2_SEGS 64
/* The glitch window: max_glitches in this many seconds. */
#define H2_GLITCH_WINDOW_US (10 * 1000000LL)
/* The timer's period while streams are open: stalls are found within it. */
#define H2_TICK_US 1000000LL
/* An idle connection's buffers and frame buffer pages go back this long
 * after its last stream ended, unless another burst came. */
#define H2_TRIM_US 100000LL
/* nghttp2's allocations of this size or more are its frame buffers
 * (NGHTTP2_FRAMEBUF_CHUNKLEN: a 16 KiB payload and its header), whose
 * pages an idle connection gives back (h2_big_release). */
#define H2_BIG_ALLOC 16384
#define H2_BIG_MAX 8
/* Response field names whose last values a connection remembers. */
#define H2_SEEN_BITS 6
#define H2_SEEN (1 << H2_SEEN_BITS)
#define H2_SEEN_WAYS 4
/* Rounds of the settle loop in one turn (each does work or stops). */
#define H2_ROUNDS 64

struct h2_conn;

/* The last two values a connection sent under a response field name
 * (keys of their bytes, h2_index_flag; 0 for none), in a table of
 * H2_SEEN places where a name takes the first of H2_SEEN_WAYS from the
 * one its key picks that is its own or free (or, all taken, the first). */
struct h2_seen {
	uint32_t name, v1, v2;
};

/* The output: frames copied from nghttp2 into buf, and the queue of
 * slices to write (buf's and bodies'), and what h2_index_flag keeps. An
 * idle connection holds none. */
struct h2_wout {
	struct outq q;
	char buf[H2_WBUF];
	struct h2_seen seen[H2_SEEN];
};

/* A slice of a response body ready to go, decoded from out slice src. */
struct h2_seg {
	const char *p;
	size_t n;
	int src;
};

struct h2_stream {
	struct h2_conn *hc;
	int32_t id;
	struct h2_stream *next, *prev;
	struct freelist_link reuse;     /* on the worker's free_h2 */

	/* the request and what it borrows (the connection's for HTTP/1.1) */
	struct request rq;
	struct rbuf in;                 /* the head made of HEADERS, then the body */
	struct outq out;                /* the response body, and a head in
					   HTTP/1.1 form but a backend's */
	struct http1_header *hdrs;
	unsigned hdrs_cap;
	char *scratch;                  /* before the head is made: the
					   fields, then lent to the request */
	size_t scratch_cap;

	/* the head being made */
	size_t lines;                   /* bytes of header lines in scratch */
	size_t m_off, m_len, p_off, p_len, a_off, a_len; /* :method, :path,
					   :authority in scratch */
	size_t ck_len;                  /* cookie crumbs, joined, in in.data */
	unsigned fields;
	size_t field_bytes;
	bool too_big;                   /* past the limits: 431 */
	bool nomem;                     /* a buffer could not grow: 503 */
	bool has_cl;                    /* a content-length came */
	bool host_seen;

	/* the request body */
	bool chunked_in;                /* framed chunked in in */
	bool in_end;                    /* END_STREAM came */
	bool last_chunk;                /* its last-chunk is in in */
	size_t head_left;               /* head bytes at in's start (not
					   window credit when they go) */
	bool data_due;                  /* new body bytes for the request */

	/* the life */
	bool ready;                     /* the head is complete: start it */
	bool started;                   /* req_begin'd */
	bool closed;                    /* nghttp2 closed the stream */
	bool reset;                     /* it ended without its response */
	bool done;                      /* the request is REQ_DONE */
	bool ended;                     /* req_end called */
	bool wake_due;                  /* req_end said a wake-up is coming */
	bool in_wq;                     /* slices of it are in the output,
					   and it is on hc->wq_first's list */
	bool on_due;                    /* on hc->due_first's list */
	struct h2_stream *due_next;     /* on that list */
	struct h2_stream *wq_next;      /* on hc->wq_first's */
	bool drain_due;                 /* slices of it went out: release
					   them, tell it when all did */
	bool waiting;                   /* the request waits for drained */
	bool working;                   /* counted in hc->working */

	/* the response */
	bool head_out;                  /* turned into HEADERS */
	bool has_body;
	bool dechunk;
	bool small;                     /* no body, or one of H2_COPY_MAX at most */
	bool eof;                       /* the body is complete in segs */
	bool eof_out;                   /* END_STREAM is ours to send now */
	bool deferred;                  /* the data source said DEFERRED */
	uint64_t body_left;             /* HTTP1_BODY_LENGTH */
	struct http1_chunked ck;
	int norm_idx;                   /* out slice decoded up to, and */
	size_t norm_off;                /* the offset in it */
	struct h2_seg segs[H2_SEGS];
	int seg_r, seg_w;
	size_t seg_off;                 /* sent of segs[seg_r] */
	int64_t stall_since;            /* window closed with bytes ready */
	uint64_t sent_bytes;            /* of its body, over its life */
	uint64_t stall_mark;            /* sent_bytes at stall_since */
	int64_t body_since;             /* the request body's window open and
					   no byte of it since */
	uint64_t body_got;              /* its bytes received, over its life */
	uint64_t body_mark;             /* body_got at body_since */
};

struct h2_conn {
	struct client *c;
	struct worker *w;
	int fd;
	struct ssl_st *ssl;             /* NULL: cleartext */
	nghttp2_session *s;
	const char *ip;
	size_t iplen;
	struct h2_stream *streams;      /* every live stream, zombies too,
					   oldest first */
	struct h2_stream *last;
	struct h2_stream *rx;           /* the stream whose header block is
					   coming (h2_rx_stream), NULL once it
					   is freed */
	unsigned nstreams;
	unsigned working;               /* of them, those whose request is
					   not answered yet (reset ones too):
					   the places max_streams counts */

	char *rbuf;
	size_t rcap;
	size_t pend;                    /* bytes in rbuf handed over at the
					   start, not yet given to nghttp2 */
	struct h2_wout *wo;             /* NULL while idle (h2_idle_trim) */
	nghttp2_mem mem;                /* nghttp2's allocator: h2_malloc... */
	struct {
		void *p;
		size_t n;
	} big[H2_BIG_MAX];              /* its frame buffers */
	size_t wlen;

	unsigned busy;
	struct h2_stream *due_first, *due_last; /* the streams that set a
					   flag h2_settle reads (ready,
					   data_due, drain_due, closed, ended,
					   wake_due; h2_due): it looks at them
					   alone, and a turn with none at no
					   stream */
	bool cleartext;                 /* h2c: neither TLS here nor a
					   terminator's ALPN h2 before */
	bool due_all;                   /* h2_settle walks them all (the
					   tick, the connection's close) */
	struct h2_stream *wq_first;     /* those with slices in the output */
	bool closed;
	bool flushing, flush_again;
	bool read_paused;
	bool writing;
	bool goaway;                    /* a graceful GOAWAY went out */
	int32_t goaway_last;            /* its last stream id */
	bool ticking;                   /* the timer is armed for a tick */
	bool trim_due;                  /* ... to give an idle one's memory back */
	bool fatal;                     /* close once the output is out */
	unsigned max_streams;
	unsigned requests;
	unsigned glitches;
	int64_t glitch_since;
	unsigned early_resets;
	int64_t reset_since;
	bool settings_seen;
	int64_t last_active;
	uint64_t delivered;             /* wq.sent the client had acked at
					   the last tick */
	int64_t stuck_since;
	int64_t tick_at;                /* the next tick's stall checks */
};

static void h2_on_event(evutil_socket_t fd, short what, void *arg);
static void h2_leave(struct h2_conn *hc);
static void h2_op_leave(struct h2_conn *hc);
static int h2_frames(struct h2_conn *hc);
static void h2_close_now(struct h2_conn *hc);
static void h2_flush(struct h2_conn *hc);
static void h2_stream_pump(struct h2_stream *st);
static const struct req_client_ops h2_req_ops;

/* ---- the socket: one read call, one write call ---------------------------- */

/* conn_recv's conventions: bytes read, 0 at EOF, -1 with errno (EAGAIN
 * also when OpenSSL waits for the socket either way). */
static ssize_t h2_io_recv(struct h2_conn *hc, void *buf, size_t len)
{
	return hc->ssl ? tls_recv(hc->ssl, buf, len) : conn_recv(hc->fd, buf, len);
}

/* conn_flush's conventions: 1 the queue is out, 0 the rest waits for the
 * socket, -1 error. A TLS write waits for the socket to be writable
 * (renegotiation is off, so OpenSSL's write never waits for a read); the
 * bytes it could not finish are offered again as they are, from the
 * head of the queue (tls_flush). */
static int h2_io_flush(struct h2_conn *hc)
{
	return hc->ssl ? tls_flush(hc->ssl, &hc->wo->q) : conn_flush(hc->fd, &hc->wo->q);
}

static bool h2_wq_empty(const struct h2_conn *hc)
{
	return !hc->wo || outq_empty(&hc->wo->q);
}

static int h2_wout_new(struct h2_conn *hc)
{
	hc->wo = malloc(sizeof(*hc->wo));
	if (!hc->wo)
		return -1;
	outq_reset(&hc->wo->q);
	hc->wo->q.sent = 0;
	memset(hc->wo->seen, 0, sizeof(hc->wo->seen));
	hc->wlen = 0;
	return 0;
}

/* ---- nghttp2's allocator ------------------------------------------------------ */

/* glibc's, with the connection's frame buffers noted: nghttp2 keeps one
 * (16 KiB and its header) for the life of the session, whose bytes are
 * dead between frames (each is copied out as it is made, h2_frames).
 * An idle connection hands their whole pages back to the kernel
 * (h2_big_release): a page comes back zeroed when the next frame is
 * made on it. */
static void h2_big_note(struct h2_conn *hc, void *p, size_t n)
{
	for (int i = 0; i < H2_BIG_MAX; i++)
		if (!hc->big[i].p) {
			hc->big[i].p = p;
			hc->big[i].n = n;
			return;
		}
}

static void h2_big_forget(struct h2_conn *hc, void *p)
{
	for (int i = 0; i < H2_BIG_MAX; i++)
		if (hc->big[i].p == p) {
			hc->big[i].p = NULL;
			return;
		}
}

/* A frame buffer: whole pages of its own, all of them given back while
 * idle (in the heap among other blocks, its first and last pages would
 * stay) */
static void *h2_big_alloc(struct h2_conn *hc, size_t n)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t pg = page > 0 ? (size_t)page : 4096, whole = (n + pg - 1) / pg * pg;
	void *p = NULL;

	if (posix_memalign(&p, pg, whole) != 0)
		return NULL;
	h2_big_note(hc, p, whole);
	return p;
}

static void *h2_malloc(size_t n, void *arg)
{
	return n >= H2_BIG_ALLOC ? h2_big_alloc(arg, n) : malloc(n);
}

static void h2_free(void *p, void *arg)
{
	if (p)
		h2_big_forget(arg, p);
	free(p);
}

static void *h2_calloc(size_t k, size_t n, void *arg)
{
	void *p;

	if (n == 0 || k < H2_BIG_ALLOC / n)
		return calloc(k, n);
	if (k > SIZE_MAX / n)
		return NULL;
	p = h2_big_alloc(arg, k * n);
	if (p)
		memset(p, 0, k * n);
	return p;
}

static void *h2_realloc(void *o, size_t n, void *arg)
{
	struct h2_conn *hc = arg;
	size_t old = 0;
	bool big = false;
	void *p;

	for (int i = 0; o && i < H2_BIG_MAX; i++)
		if (hc->big[i].p == o) {
			old = hc->big[i].n;
			big = true;
		}
	if (!big && n < H2_BIG_ALLOC)
		return realloc(o, n);
	if (n == 0) {
		h2_free(o, arg);
		return NULL;
	}
	p = n >= H2_BIG_ALLOC ? h2_big_alloc(hc, n) : malloc(n);
	if (!p)
		return NULL;
	if (o) {
		if (!big)
			old = malloc_usable_size(o);
		memcpy(p, o, old < n ? old : n);
		h2_free(o, arg);
	}
	return p;
}

/* The frame buffers' pages (whole ones, h2_big_alloc) go back to the
 * kernel: their contents are garbage while nothing is being written. */
static void h2_big_release(struct h2_conn *hc)
{
	for (int i = 0; i < H2_BIG_MAX; i++)
		if (hc->big[i].p)
			madvise(hc->big[i].p, hc->big[i].n, MADV_DONTNEED);
}

/* ---- counting ---------------------------------------------------------------- */

/* st set a flag h2_settle reads: it goes on the connection's list of
 * streams with work, once, in the order they came to it. */
static void h2_due(struct h2_stream *st)
{
	struct h2_conn *hc = st->hc;

	if (st->on_due)
		return;
	st->on_due = true;
	st->due_next = NULL;
	if (hc->due_last)
		hc->due_last->due_next = st;
	else
		hc->due_first = st;
	hc->due_last = st;
}

static void h2_count(struct h2_conn *hc, _Atomic uint64_t *counter)
{
	(void)hc;
	atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}

/* A frame that did no work: past max_glitches in a window, the connection
 * ends with GOAWAY ENHANCE_YOUR_CALM. Returns true when it ended. */
static bool h2_glitch(struct h2_conn *hc)
{
	int64_t now = deadline_now_us();

	h2_count(hc, &hc->w->proxy->h2_glitches);
	if (now - hc->glitch_since > H2_GLITCH_WINDOW_US) {
		hc->glitch_since = now;
		hc->glitches = 0;
	}
	if (++hc->glitches <= hc->w->snap->conf->h2_max_glitches || hc->fatal)
		return false;
	h2_count(hc, &hc->w->proxy->h2_goaway_calm);
	nghttp2_session_terminate_session(hc->s, NGHTTP2_ENHANCE_YOUR_CALM);
	hc->fatal = true;
	return true;
}

/* The client reset a stream before its response was complete. A browser
 * cancels a few (a page left); twice as many as there are places within
 * the glitch window is an attack (Rapid Reset, CVE-2023-44487), whose
 * requests each cost a backend: GOAWAY ENHANCE_YOUR_CALM. */
static void h2_early_reset(struct h2_conn *hc)
{
	int64_t now = deadline_now_us();

	if (now - hc->reset_since > H2_GLITCH_WINDOW_US) {
		hc->reset_since = now;
		hc->early_resets = 0;
	}
	if (++hc->early_resets <= 2 * hc->max_streams || hc->fatal)
		return;
	h2_count(hc, &hc->w->proxy->h2_goaway_calm);
	nghttp2_session_terminate_session(hc->s, NGHTTP2_ENHANCE_YOUR_CALM);
	hc->fatal = true;
}

/* ---- streams -------------------------------------------------------------------- */

/* Room for need bytes in a stream's buffer: grown to need, at least
 * doubled, never past most. 0, -1 past most, -2 out of memory. */
static int h2_grow(char **buf, size_t *cap, size_t need, size_t most)
{
	size_t nc = *cap * 2 > need ? *cap * 2 : need;
	char *p;

	if (need <= *cap)
		return 0;
	if (need > most)
		return -1;
	if (nc > most)
		nc = most;
	p = realloc(*buf, nc);
	if (!p)
		return -2;
	*buf = p;
	*cap = nc;
	return 0;
}

/* A stream's buffer at the start of its life: H2_BUF_START, or what it
 * grew to when it is not past most (the limits may have shrunk). */
static bool h2_buf_ready(char **buf, size_t *cap, size_t most)
{
	size_t want = *buf == NULL ? H2_BUF_START : *cap > most ? most : *cap;
	char *p;

	if (want > most)
		want = most;
	if (*buf && want == *cap)
		return true;
	p = realloc(*buf, want);
	if (!p)
		return false;
	*buf = p;
	*cap = want;
	return true;
}

/* The head's bytes (the fields, then the head made of them) fit in
 * these; a body comes into in beside the window (h2_stream_start). */
static size_t h2_scratch_most(const struct conf *conf)
{
	return conf->max_head_size + WORKER_SCRATCH_EXTRA;
}

static size_t h2_head_most(const struct conf *conf)
{
	return conf->max_head_size + 256;
}

static size_t h2_body_most(const struct conf *conf)
{
	return conf->max_head_size + 256 + 2 * conf->h2_window;
}

/* Room for need bytes in one of the stream's buffers: false when past
 * most, or out of memory (nomem then). in only before the request
 * began: its slices point in it. */
static bool h2_fit(struct h2_stream *st, char **buf, size_t *cap, size_t need, size_t most)
{
	int g = h2_grow(buf, cap, need, most);

	st->nomem |= g == -2;
	return g == 0;
}

static bool h2_in_fit(struct h2_stream *st, size_t need, size_t most)
{
	return h2_fit(st, &st->in.data, &st->in.cap, need, most);
}

static struct h2_stream *h2_stream_new(struct h2_conn *hc, int32_t id)
{
	const struct conf *conf = hc->w->snap->conf;
	struct freelist_link *l = worker_stock_take(&hc->w->free_h2);
	struct h2_stream *st = l ? FREELIST_ENTRY(l, struct h2_stream, reuse) : NULL;

	if (!st) {
		st = calloc(1, sizeof(*st));
		if (!st) {
			worker_stock_forget(&hc->w->free_h2);
			return NULL;
		}
	}
	if (!h2_buf_ready(&st->scratch, &st->scratch_cap, h2_scratch_most(conf)) ||
	    !h2_buf_ready(&st->in.data, &st->in.cap, h2_body_most(conf)))
		goto fail;
	/* the fields' array is sized at the start, to their count */
	if (st->hdrs_cap > conf->max_headers) {
		free(st->hdrs);
		st->hdrs = NULL;
		st->hdrs_cap = 0;
	}
	/* everything from lines on is per stream */
	memset(&st->lines, 0, sizeof(*st) - offsetof(struct h2_stream, lines));
	st->in.pos = st->in.len = 0;
	outq_reset(&st->out);
	st->out.sent = 0;
	st->hc = hc;
	st->id = id;
	req_init(&st->rq, hc->w, (struct client *)(void *)st, &st->in, &st->out, &st->scratch,
		 &st->scratch_cap, hc->ip, hc->iplen, &h2_req_ops, &fwd_req_ops);
	/* over TLS (ours, or a terminator's): https in the key, the
	 * forwarded proto and the log line, as for HTTP/1.1 */
	if (hc->c->https)
		req_client_https(&st->rq, true);
	if (hc->ssl)
		req_client_tls(&st->rq, SSL_get_version(hc->ssl), SSL_get_cipher_name(hc->ssl),
			       SSL_get_servername(hc->ssl, TLSEXT_NAMETYPE_host_name));
	/* in the order they came: started in that order */
	st->next = NULL;
	st->prev = hc->last;
	if (hc->last)
		hc->last->next = st;
	else
		hc->streams = st;
	hc->last = st;
	hc->nstreams++;
	st->working = true;
	hc->working++;
	return st;
fail:
	worker_stock_forget(&hc->w->free_h2);
	free(st->scratch);
	free(st->in.data);
	free(st->hdrs);
	free(st);
	return NULL;
}

/* The stream's request is answered (or let go of): its place is free,
 * even while the last of its response is still on its way out. */
static void h2_stream_unwork(struct h2_stream *st)
{
	if (st->working) {
		st->working = false;
		st->hc->working--;
	}
}

static void h2_stream_release(struct h2_stream *st)
{
	free(st->scratch);
	free(st->in.data);
	free(st->hdrs);
	free(st);
}

/* The worker's stock of streams frees with this (worker_stock). */
static void h2_stream_link_release(struct freelist_link *l)
{
	h2_stream_release(FREELIST_ENTRY(l, struct h2_stream, reuse));
}

/* The stream is gone from the session and its request let go: off the
 * list, kept with its buffers for the worker's next streams, any
 * connection's (up to WORKER_H2_FREE_MAX, worker.c). */
static void h2_stream_free(struct h2_stream *st)
{
	struct h2_conn *hc = st->hc;

	h2_stream_unwork(st);
	if (st->prev)
		st->prev->next = st->next;
	else
		hc->streams = st->next;
	if (st->next)
		st->next->prev = st->prev;
	else
		hc->last = st->prev;
	hc->nstreams--;
	if (hc->rx == st)
		hc->rx = NULL;
	worker_stock_give(hc->w, &hc->w->free_h2, &st->reuse);
}

/* The stream of a HEADERS frame's callbacks: the one whose block began
 * last, without nghttp2's map (a block's fields come one callback each, and
 * no frame of another stream comes in between, RFC 9113 6.10), else the
 * map's. */
static struct h2_stream *h2_rx_stream(struct h2_conn *hc, int32_t id)
{
	if (hc->rx && hc->rx->id == id)
		return hc->rx;
	return nghttp2_session_get_stream_user_data(hc->s, id);
}


/* ---- the request's head, from HEADERS ------------------------------------------ */

/* Header fields nghttp2 passes and an HTTP/1.1 head must not carry from an
 * HTTP/2 request (nghttp2's own checks refuse connection fields and te
 * other than trailers already). */
static bool h2_name_is(const uint8_t *n, size_t len, const char *lower)
{
	return strlen(lower) == len && memcmp(n, lower, len) == 0;
}

/* Append bytes to the scratch area of the head being made; false when
 * they do not fit (the head is too large). */
static bool h2_put(struct h2_stream *st, const void *p, size_t n)
{
	if (!h2_fit(st, &st->scratch, &st->scratch_cap, st->lines + n, h2_scratch_most(st->hc->w->snap->conf)))
		return false;
	memcpy(st->scratch + st->lines, p, n);
	st->lines += n;
	return true;
}

static int h2_on_header(nghttp2_session *s, const nghttp2_frame *frame, const uint8_t *name,
			size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *arg)
{
	struct h2_conn *hc = arg;
	const struct conf *conf = hc->w->snap->conf;
	struct h2_stream *st;

	(void)flags;
	if (frame->hd.type != NGHTTP2_HEADERS)
		return 0;
	st = h2_rx_stream(hc, frame->hd.stream_id);
	if (!st || st->ready)
		return 0;               /* refused, or trailers: dropped */
	st->fields++;
	st->field_bytes += namelen + valuelen + 32;
	if (st->too_big)
		return 0;
	if (st->fields > conf->max_headers || st->field_bytes > conf->max_head_size) {
		st->too_big = true;
		return 0;
	}
	if (namelen > 0 && name[0] == ':') {
		size_t *off, *len;

		if (h2_name_is(name, namelen, ":method"))
			off = &st->m_off, len = &st->m_len;
		else if (h2_name_is(name, namelen, ":path"))
			off = &st->p_off, len = &st->p_len;
		else if (h2_name_is(name, namelen, ":authority"))
			off = &st->a_off, len = &st->a_len;
		else
			return 0;       /* :scheme: the backend gets its own */
		*off = st->lines;
		*len = valuelen;
		if (!h2_put(st, value, valuelen))
			st->too_big = true;
		return 0;
	}
	if (h2_name_is(name, namelen, "cookie")) {
		/* RFC 9113 8.2.3: crumbs joined with "; " into one field,
		 * kept in the read buffer until the head is made */
		size_t need = st->ck_len + (st->ck_len ? 2 : 0) + valuelen;

		if (need > h2_head_most(conf) / 2 || !h2_in_fit(st, need, h2_head_most(conf))) {
			st->too_big = true;
			return 0;
		}
		if (st->ck_len) {
			memcpy(st->in.data + st->ck_len, "; ", 2);
			st->ck_len += 2;
		}
		memcpy(st->in.data + st->ck_len, value, valuelen);
		st->ck_len += valuelen;
		return 0;
	}
	if (h2_name_is(name, namelen, "host")) {
		st->host_seen = true;
		if (st->a_len)
			return 0;       /* :authority wins (RFC 9113 8.3.1) */
	}
	if (h2_name_is(name, namelen, "content-length"))
		st->has_cl = true;
	if (h2_name_is(name, namelen, "expect"))
		return 0;               /* no 100 Continue in h2 here: the
					   body comes as the window lets it */
	if (!h2_put(st, name, namelen) || !h2_put(st, ": ", 2) || !h2_put(st, value, valuelen) ||
	    !h2_put(st, "\r\n", 2))
		st->too_big = true;
	return 0;
}

/* The fields are all in: make the HTTP/1.1 head in st->in. false when it
 * does not fit. */
static bool h2_make_head(struct h2_stream *st)
{
	char *d;
	size_t n;
	size_t pre = st->m_len + 1 + st->p_len + sizeof(" HTTP/1.1\r\n") - 1 +
		     (st->a_len ? sizeof("Host: \r\n") - 1 + st->a_len : 0);
	size_t ck = st->ck_len ? sizeof("Cookie: \r\n") - 1 + st->ck_len : 0;
	size_t hdr_lines = st->lines - st->p_off - st->p_len; /* see below */
	size_t tail = st->chunked_in ? sizeof("Transfer-Encoding: chunked\r\n") - 1 : 0;

	/* scratch holds the pseudo fields first (nghttp2 lets none come
	 * after a regular one), then the lines; the lines begin after the
	 * last pseudo field */
	{
		size_t end = 0;

		if (st->m_off + st->m_len > end)
			end = st->m_off + st->m_len;
		if (st->p_off + st->p_len > end)
			end = st->p_off + st->p_len;
		if (st->a_off + st->a_len > end)
			end = st->a_off + st->a_len;
		hdr_lines = st->lines - end;
		n = end;
	}
	if (!h2_in_fit(st, pre + hdr_lines + ck + tail + 2, h2_head_most(st->hc->w->snap->conf)))
		return false;
	d = st->in.data;
	/* the cookie crumbs move to their place first: behind everything
	 * but the final CRLF (they are at in's start) */
	if (ck) {
		size_t at = pre + hdr_lines + tail;

		memmove(d + at + 8, d, st->ck_len);
		memcpy(d + at, "Cookie: ", 8);
		memcpy(d + at + 8 + st->ck_len, "\r\n", 2);
	}
	{
		char *p = d;

		memcpy(p, st->scratch + st->m_off, st->m_len);
		p += st->m_len;
		*p++ = ' ';
		memcpy(p, st->scratch + st->p_off, st->p_len);
		p += st->p_len;
		memcpy(p, " HTTP/1.1\r\n", 11);
		p += 11;
		if (st->a_len) {
			memcpy(p, "Host: ", 6);
			p += 6;
			memcpy(p, st->scratch + st->a_off, st->a_len);
			p += st->a_len;
			memcpy(p, "\r\n", 2);
			p += 2;
		}
		memcpy(p, st->scratch + n, hdr_lines);
		p += hdr_lines;
		if (tail) {
			memcpy(p, "Transfer-Encoding: chunked\r\n", tail);
			p += tail;
		}
		p += ck;
		memcpy(p, "\r\n", 2);
		p += 2;
		st->in.len = (size_t)(p - d);
	}
	st->head_left = st->in.len;
	return true;
}

/* ---- the request body, from DATA ------------------------------------------------- */

/* Append a DATA frame's payload to the stream's buffer, framed chunked when
 * no content-length came. false when it does not fit (the client sent
 * past its window, or in crumbs smaller than the framing). */
static bool h2_body_put(struct h2_stream *st, const uint8_t *data, size_t len)
{
	char line[HTTP1_CHUNK_LINE_MAX];
	size_t ll = 0, need;

	if (len == 0)
		return true;
	if (st->chunked_in)
		ll = http1_chunk_line(line, len, false);
	need = ll + len + (st->chunked_in ? 2 : 0);
	if (st->in.len + need > st->in.cap) {
		/* compact first: what the request took is gone */
		size_t keep = st->started ? req_keep_from(&st->rq) : 0;

		if (keep > 0) {
			memmove(st->in.data, st->in.data + keep, st->in.len - keep);
			st->in.len -= keep;
			req_rebase(&st->rq, keep);
			st->head_left = keep >= st->head_left ? 0 : st->head_left - keep;
		}
		if (st->in.len + need > st->in.cap &&
		    (st->started || !h2_in_fit(st, st->in.len + need, h2_body_most(st->hc->w->snap->conf))))
			return false;
	}
	memcpy(st->in.data + st->in.len, line, ll);
	memcpy(st->in.data + st->in.len + ll, data, len);
	st->in.len += ll + len;
	if (st->chunked_in) {
		memcpy(st->in.data + st->in.len, "\r\n", 2);
		st->in.len += 2;
	}
	return true;
}

static void h2_body_end(struct h2_stream *st)
{
	st->in_end = true;
	if (st->chunked_in && !st->last_chunk &&
	    (st->in.len + 5 <= st->in.cap ||
	     (!st->started && h2_in_fit(st, st->in.len + 5, h2_body_most(st->hc->w->snap->conf))))) {
		memcpy(st->in.data + st->in.len, "0\r\n\r\n", 5);
		st->in.len += 5;
		st->last_chunk = true;
	}
	st->data_due = true;
	h2_due(st);
}

/* ---- the session's callbacks ----------------------------------------------------- */

static int h2_on_begin_frame(nghttp2_session *s, const nghttp2_frame_hd *hd, void *arg)
{
	struct h2_conn *hc = arg;
	bool glitch = false;

	(void)s;
	switch (hd->type) {
	case NGHTTP2_DATA:
		glitch = hd->length == 0 && !(hd->flags & NGHTTP2_FLAG_END_STREAM);
		break;
	case NGHTTP2_PRIORITY:
		glitch = true;
		break;
	case NGHTTP2_PING:
		glitch = !(hd->flags & NGHTTP2_FLAG_ACK);
		break;
	case NGHTTP2_SETTINGS:
		if (!(hd->flags & NGHTTP2_FLAG_ACK)) {
			glitch = hc->settings_seen;
			hc->settings_seen = true;
		}
		break;
	case NGHTTP2_PRIORITY_UPDATE:   /* judged once read (h2_on_frame_recv) */
	case NGHTTP2_HEADERS:
	case NGHTTP2_RST_STREAM:
	case NGHTTP2_PUSH_PROMISE:
	case NGHTTP2_GOAWAY:
	case NGHTTP2_WINDOW_UPDATE:
	case NGHTTP2_CONTINUATION:
		break;
	default:
		glitch = true;          /* unknown and extension frames */
		break;
	}
	if (glitch)
		h2_glitch(hc);
	return 0;
}

static int h2_on_begin_headers(nghttp2_session *s, const nghttp2_frame *frame, void *arg)
{
	struct h2_conn *hc = arg;
	struct h2_stream *st;

	if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	/* a stream keeps its place until its request let go (Rapid Reset):
	 * nghttp2 counts open streams only, so places past ours are refused */
	if (hc->working >= hc->max_streams || hc->fatal) {
		nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_REFUSED_STREAM);
		h2_glitch(hc);
		return 0;
	}
	st = h2_stream_new(hc, frame->hd.stream_id);
	if (!st) {
		nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_INTERNAL_ERROR);
		return 0;
	}
	nghttp2_session_set_stream_user_data(s, frame->hd.stream_id, st);
	hc->rx = st;
	return 0;
}

static int h2_on_frame_recv(nghttp2_session *s, const nghttp2_frame *frame, void *arg)
{
	struct h2_stream *st;

	switch (frame->hd.type) {
	case NGHTTP2_HEADERS:
		st = h2_rx_stream(arg, frame->hd.stream_id);
		if (!st)
			return 0;
		if (st->ready) {
			/* trailers: the body ends here; their fields are not
			 * forwarded */
			if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
				h2_body_end(st);
			return 0;
		}
		st->ready = true;
		h2_due(st);
		st->chunked_in = !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM) && !st->has_cl;
		if (st->too_big || !h2_make_head(st)) {
			st->too_big = true;
			st->in.len = 0;
		}
		if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
			h2_body_end(st);
		break;
	case NGHTTP2_DATA:
		st = nghttp2_session_get_stream_user_data(s, frame->hd.stream_id);
		if (st && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
			h2_body_end(st);
		break;
	case NGHTTP2_RST_STREAM:
		st = nghttp2_session_get_stream_user_data(s, frame->hd.stream_id);
		if (st && !st->done)
			h2_early_reset(arg);
		break;
	case NGHTTP2_PRIORITY_UPDATE: {
		/* RFC 9218: a browser reorders the requests it has under
		 * way; one for a stream not open with us (idle: nghttp2 keeps
		 * an idle stream for it, the oldest of 100 dropped; closed)
		 * did no work: a flood of them is a glitch flood */
		const nghttp2_ext_priority_update *pu = frame->ext.payload;

		if (!pu || !nghttp2_session_get_stream_user_data(s, pu->stream_id))
			h2_glitch(arg);
		break;
	}
	default:
		break;
	}
	return 0;
}

static int h2_on_data_chunk(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
			    void *arg)
{
	struct h2_conn *hc = arg;
	struct h2_stream *st = nghttp2_session_get_stream_user_data(s, id);

	(void)flags;
	if (!st || st->too_big || st->reset) {
		/* nobody takes it: the window opens again at once */
		nghttp2_session_consume(s, id, len);
		return 0;
	}
	st->body_got += len;
	if (!h2_body_put(st, data, len)) {
		nghttp2_session_consume(s, id, len);
		nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, id, NGHTTP2_ENHANCE_YOUR_CALM);
		h2_glitch(hc);
		return 0;
	}
	st->data_due = true;
	h2_due(st);
	return 0;
}

static int h2_on_stream_close(nghttp2_session *s, int32_t id, uint32_t code, void *arg)
{
	struct h2_conn *hc = arg;
	struct h2_stream *st = nghttp2_session_get_stream_user_data(s, id);

	if (!st)
		return 0;
	st->closed = true;
	h2_due(st);
	if (code == NGHTTP2_NO_ERROR && st->eof_out) {
		/* our END_STREAM went: the request hears the rest is out
		 * once the socket took it (drained), its place is free */
		h2_stream_unwork(st);
		return 0;
	}
	if (!st->done || code != NGHTTP2_NO_ERROR) {
		st->reset = true;
		if (st->started && !st->done) {
			h2_count(hc, &hc->w->proxy->h2_resets_received);
		}
	}
	return 0;
}

static int h2_on_invalid_frame(nghttp2_session *s, const nghttp2_frame *frame, int err, void *arg)
{
	(void)s;
	(void)frame;
	(void)err;
	h2_glitch(arg);
	return 0;
}

/* Frames of unknown types: counted (h2_on_begin_frame), dropped. */
static int h2_on_ext_chunk(nghttp2_session *s, const nghttp2_frame_hd *hd, const uint8_t *data, size_t len,
			   void *arg)
{
	(void)s;
	(void)hd;
	(void)data;
	(void)len;
	(void)arg;
	return 0;
}

static int h2_unpack_ext(nghttp2_session *s, void **payload, const nghttp2_frame_hd *hd, void *arg)
{
	(void)s;
	(void)payload;
	(void)hd;
	(void)arg;
	return NGHTTP2_ERR_CANCEL;
}

/* ---- response bodies ----------------------------------------------------------- */

static ssize_t h2_data_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
			    nghttp2_data_source *source, void *arg)
{
	struct h2_stream *st = source->ptr;
	size_t n = 0;

	(void)s;
	(void)id;
	(void)buf;
	(void)arg;
	for (int i = st->seg_r; i < st->seg_w && n < length; i++)
		n += st->segs[i].n - (i == st->seg_r ? st->seg_off : 0);
	if (n > length)
		n = length;
	*flags |= NGHTTP2_DATA_FLAG_NO_COPY;
	if (st->eof) {
		size_t all = 0;

		for (int i = st->seg_r; i < st->seg_w; i++)
			all += st->segs[i].n - (i == st->seg_r ? st->seg_off : 0);
		if (all <= length) {
			*flags |= NGHTTP2_DATA_FLAG_EOF;
			st->eof_out = true;
		}
	}
	if (n == 0 && !(*flags & NGHTTP2_DATA_FLAG_EOF)) {
		st->deferred = true;
		return NGHTTP2_ERR_DEFERRED;
	}
	return (ssize_t)n;
}

/* A DATA frame of ours: its header copied, its payload too when it is
 * small (a thumbnail: the stream is done with its slices at once, and
 * the frames of many streams go out in one write later in the turn),
 * else the stream's slices by reference. */
static int h2_send_data(nghttp2_session *s, nghttp2_frame *frame, const uint8_t *framehd, size_t length,
			nghttp2_data_source *source, void *arg)
{
	struct h2_conn *hc = arg;
	struct h2_stream *st = source->ptr;
	size_t left = length;

	(void)s;
	if (hc->wo->q.cnt + H2_FRAME_SLICES > OUT_IOV_MAX || hc->wlen + 9 + 256 > H2_WBUF)
		return NGHTTP2_ERR_WOULDBLOCK;
	memcpy(hc->wo->buf + hc->wlen, framehd, 9);
	outq_append(&hc->wo->q, hc->wo->buf + hc->wlen, 9);
	hc->wlen += 9;
	if (frame->data.padlen > 0) {
		/* we never ask for padding; nghttp2 adds none on its own */
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	}
	bool copy = length <= H2_COPY_MAX && hc->wlen + length <= H2_WBUF;
	char *to = hc->wo->buf + hc->wlen;

	while (left > 0 && st->seg_r < st->seg_w) {
		struct h2_seg *g = &st->segs[st->seg_r];
		size_t k = g->n - st->seg_off;

		if (k > left)
			k = left;
		if (copy) {
			memcpy(to, g->p + st->seg_off, k);
			to += k;
		} else if (hc->wo->q.cnt >= OUT_IOV_MAX - 1) {
			return NGHTTP2_ERR_CALLBACK_FAILURE;
		} else {
			outq_append(&hc->wo->q, g->p + st->seg_off, k);
		}
		st->seg_off += k;
		left -= k;
		if (st->seg_off == g->n) {
			st->seg_r++;
			st->seg_off = 0;
		}
	}
	if (left > 0)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	st->sent_bytes += length;
	if (st->seg_r == st->seg_w)
		st->seg_r = st->seg_w = 0;
	if (copy) {
		outq_append(&hc->wo->q, hc->wo->buf + hc->wlen, length);
		hc->wlen += length;
		/* its slices are done with: a request waiting for that hears
		 * it (h2_settle), before the stream's end */
		st->drain_due = true;
		h2_due(st);
	} else if (!st->in_wq) {
		st->in_wq = true;
		st->wq_next = hc->wq_first;
		hc->wq_first = st;
	}
	return 0;
}

/* ---- the response, from the request's HTTP/1.1 form ------------------------------ */

/* Gather the response head that starts at slice idx of st->out (at
 * st->norm_off in it) into *buf (sbuf, or a larger one allocated),
 * copying no byte past its end (a slice may hold the body too): the end
 * is looked for across the seam with what came before, then in each
 * slice. Returns the slice the head ends in, with *len its bytes and
 * *end_off the offset past it in that slice; -1 when its end is not
 * queued yet; -2 out of memory. */
/* The first "\r\n\r\n" in p[0..n): a line's end found with memchr (a
 * head is lines of tens of bytes), then the three bytes before it.
 * memmem's general search cost 4.5 instructions a byte here. */
static const char *h2_blank_line(const char *p, size_t n)
{
	const char *e = p + n, *q = p + 3;

	while (q < e && (q = memchr(q, '\n', (size_t)(e - q)))) {
		if (q[-1] == '\r' && q[-2] == '\n' && q[-3] == '\r')
			return q - 3;
		q++;
	}
	return NULL;
}

static int h2_head_gather(struct h2_stream *st, int idx, char *sbuf, char **buf, size_t *cap, size_t *len,
			  size_t *end_off)
{
	const struct outq *q = &st->out;

	for (int i = idx; i < q->cnt; i++) {
		const char *p = (const char *)q->iov[i].iov_base + (i == idx ? st->norm_off : 0), *e = NULL;
		size_t take = q->iov[i].iov_len - (i == idx ? st->norm_off : 0), upto = take;

		if (take == 0)
			continue;
		if (*len > 0) {
			char seam[6];
			size_t t = *len < 3 ? *len : 3, h = take < 3 ? take : 3;

			memcpy(seam, *buf + *len - t, t);
			memcpy(seam + t, p, h);
			if ((e = h2_blank_line(seam, t + h)))
				upto = (size_t)(e - seam) + 4 - t;
		}
		if (!e && (e = h2_blank_line(p, take)))
			upto = (size_t)(e - p) + 4;
		if (*len + upto > *cap) {
			size_t nc = (*len + upto) * 2 + 256;
			char *b = malloc(nc);

			if (!b)
				return -2;
			memcpy(b, *buf, *len);
			if (*buf != sbuf)
				free(*buf);
			*buf = b;
			*cap = nc;
		}
		memcpy(*buf + *len, p, upto);
		*len += upto;
		if (e) {
			*end_off = q->iov[i].iov_len - (take - upto);
			return i;
		}
	}
	return -1;
}

/* x with each uppercase ASCII letter's 0x20 bit set (a byte with its top
 * bit set is left as it is). */
static uint64_t h2_lower8(uint64_t x)
{
	const uint64_t ones = 0x0101010101010101ull;
	uint64_t low7 = x & (0x7f * ones);
	/* 0x80 where the byte is >= 'A', and not where it is > 'Z' */
	uint64_t upper = (low7 + 0x3f * ones) & ~(low7 + 0x25 * ones) & ~x & (0x80 * ones);

	return x | upper >> 2;
}

/* dst[0..n) = src[0..n) lowercased, eight bytes at a time, the last
 * eight overlapping (a byte loop cost 5 instructions a byte). */
static void h2_lower(char *dst, const char *src, size_t n)
{
	uint64_t x;
	uint32_t y;

	if (n >= 8) {
		for (size_t i = 0; i + 8 < n; i += 8) {
			memcpy(&x, src + i, 8);
			x = h2_lower8(x);
			memcpy(dst + i, &x, 8);
		}
		memcpy(&x, src + n - 8, 8);
		x = h2_lower8(x);
		memcpy(dst + n - 8, &x, 8);
	} else if (n >= 4) {
		memcpy(&y, src, 4);
		y = (uint32_t)h2_lower8(y);
		memcpy(dst, &y, 4);
		memcpy(&y, src + n - 4, 4);
		y = (uint32_t)h2_lower8(y);
		memcpy(dst + n - 4, &y, 4);
	} else {
		for (size_t i = 0; i < n; i++)
			dst[i] = (char)(src[i] >= 'A' && src[i] <= 'Z' ? src[i] + 32 : src[i]);
	}
}

/* A key of p[0..n): its first, middle and last eight bytes (four when
 * shorter) and its length, mixed by one multiplication (Knuth's
 * constant); fold sets the 0x20 bit of every byte (a name's case). Two
 * strings that differ only elsewhere share it: that only decides HPACK
 * indexing, below. */
static uint64_t h2_key(const char *p, size_t n, uint64_t fold)
{
	uint64_t a = 0, b = 0, c = 0;
	uint32_t x, y;

	if (n >= 8) {
		memcpy(&a, p, 8);
		memcpy(&b, p + n - 8, 8);
		if (n > 16)
			memcpy(&c, p + n / 2 - 4, 8);
	} else if (n >= 4) {
		memcpy(&x, p, 4);
		memcpy(&y, p + n - 4, 4);
		a = x;
		b = y;
	} else {
		for (size_t i = 0; i < n; i++)
			a = a << 8 | (uint8_t)p[i];
	}
	a |= fold;
	b = (b | fold) << 29 | (b | fold) >> 35;
	return (a ^ b ^ c ^ n) * 0x9e3779b97f4a7c15ull;
}

/* Whether a response field goes to the peer's HPACK table: not when its
 * value is neither of the last two the connection sent under its name
 * (a counter, a request id, Varnish's X-Varnish, a per-object date).
 * Such a value is not sent again, and the table is FIFO (RFC 7541 2.3.3):
 * each one pushed out entries that do repeat, which then went out as
 * literals and were indexed again. nghttp2 leaves a few such fields it
 * knows by name out itself (content-length, etag, age, set-cookie). Two
 * values that alternate (two content types) stay indexed. */
static uint8_t h2_index_flag(struct h2_conn *hc, const char *name, size_t nl, const char *value, size_t vl)
{
	uint64_t k;
	uint32_t nk, vk;
	uint8_t flag = NGHTTP2_NV_FLAG_NONE;
	struct h2_seen *e = NULL;

	if (!hc->wo)
		return flag;
	k = h2_key(name, nl, 0x2020202020202020ull);
	nk = (uint32_t)(k >> 32) | 1;           /* never 0, a free place's */
	vk = (uint32_t)(h2_key(value, vl, 0) >> 32) | 1;
	for (unsigned i = 0, at = (unsigned)(k >> (64 - H2_SEEN_BITS)); i < H2_SEEN_WAYS; i++) {
		struct h2_seen *c = &hc->wo->seen[(at + i) % H2_SEEN];

		if (c->name == nk || c->name == 0) {
			e = c;
			break;
		}
	}
	if (!e)
		e = &hc->wo->seen[k >> (64 - H2_SEEN_BITS)];
	if (e->name != nk) {
		e->name = nk;
		e->v1 = e->v2 = 0;
	} else if (vk != e->v1 && vk != e->v2) {
		flag = NGHTTP2_NV_FLAG_NO_INDEX;
	}
	if (vk != e->v1) {
		e->v2 = e->v1;
		e->v1 = vk;
	}
	return flag;
}

/* The response's HEADERS: nv[0] is left for :status, nv[1..nn) are its
 * fields; and how its body goes, from its framing. Returns 0, -1 when
 * nghttp2 refused it. */
static int h2_submit(struct h2_stream *st, int status, enum http1_framing framing, uint64_t length,
		     nghttp2_nv *nv, size_t nn)
{
	char code[3] = { (char)('0' + status / 100 % 10), (char)('0' + status / 10 % 10),
			 (char)('0' + status % 10) };
	nghttp2_data_provider dp = { .source.ptr = st, .read_callback = h2_data_read };

	nv[0] = (nghttp2_nv){ (uint8_t *)":status", (uint8_t *)code, 7, 3, NGHTTP2_NV_FLAG_NONE };
	st->has_body = framing != HTTP1_BODY_NONE && !(framing == HTTP1_BODY_LENGTH && length == 0);
	st->dechunk = framing == HTTP1_BODY_CHUNKED;
	st->small = !st->has_body || (framing == HTTP1_BODY_LENGTH && length <= H2_COPY_MAX);
	st->body_left = framing == HTTP1_BODY_LENGTH ? length : 0;
	if (st->dechunk)
		http1_chunked_init(&st->ck);
	st->rq.status = st->rq.status ? st->rq.status : status;
	if (!st->has_body) {
		st->eof = true;
		st->eof_out = true;
	}
	if (nghttp2_submit_response(st->hc->s, st->id, nv, nn, st->has_body ? &dp : NULL) != 0)
		return -1;
	st->head_out = true;
	return 0;
}

/* The response head at the front of st->out (it is queued whole: the
 * proxy's own answers and those from the cache; a backend's comes as
 * fields, h2_req_head): turned into HEADERS. Returns 1 done, 0 none
 * queued yet, -1 the stream is reset. A 1xx head in the queue is dropped
 * (a backend's interim responses come through h2_req_interim). */
static int h2_head(struct h2_stream *st)
{
	const struct conf *conf = st->hc->w->snap->conf;
	struct outq *q = &st->out;
	struct http1_msg m;
	struct http1_limits lim;
	/* a head is copied out of the queue (its slices may be a cached
	 * object's, shared, and may lie across slices): on the stack when it
	 * fits, as the field array does; nghttp2 copies the fields it is
	 * given, and lowercases the names as it does */
	char sbuf[H2_HEAD_STACK], *buf = sbuf;
	size_t cap = sizeof(sbuf), len = 0;
	int idx = q->idx, end_idx = -1;
	size_t end_off = 0;
	ssize_t r;
	int rc = -1;
	nghttp2_nv snv[H2_NV_STACK], *nv = snv;

	for (;;) {
		len = 0;
		end_idx = h2_head_gather(st, idx, sbuf, &buf, &cap, &len, &end_off);
		if (end_idx == -2)
			goto out;
		if (end_idx < 0) {
			rc = 0;
			goto out;
		}
		http1_msg_init(&m);
		lim.max_head = len;
		lim.max_headers = conf->max_headers + 32;
		{
			struct http1_header hb[lim.max_headers];
			size_t nn = 1;

			r = http1_parse_response(&m, hb, buf, len, &lim, st->rq.msg.method_id);
			if (r <= 0)
				goto out;
			/* the head's slices are taken: they go from the queue
			 * when they are out (h2_release), at once when whole */
			st->norm_idx = end_idx;
			st->norm_off = end_off;
			if (end_off == q->iov[end_idx].iov_len && end_idx + 1 < q->cnt) {
				st->norm_idx++;
				st->norm_off = 0;
			}
			idx = st->norm_idx;
			if (m.status >= 100 && m.status < 200)
				continue;
			if (m.nheaders + 1 > H2_NV_STACK && !(nv = malloc((m.nheaders + 1) * sizeof(*nv))))
				goto out;
			for (unsigned i = 0; i < m.nheaders; i++) {
				struct http1_header *h = &m.headers[i];

				/* the connection's fields (the parser's flags;
				 * Transfer-Encoding is one) */
				if (h->flags & HTTP1_HDR_HOP)
					continue;
				nv[nn++] = (nghttp2_nv){ (uint8_t *)h->name.p, (uint8_t *)h->value.p, h->name.len,
							 h->value.len,
							 h2_index_flag(st->hc, h->name.p, h->name.len, h->value.p,
								       h->value.len) };
			}
			if (h2_submit(st, m.status, m.framing, m.content_length, nv, nn) == 0)
				rc = 1;
			goto out;
		}
	}
out:
	if (nv != snv)
		free(nv);
	if (buf != sbuf)
		free(buf);
	return rc;
}

/* Has every byte the request queued been decoded (into segments, or as
 * framing)? The last slice may still grow: a body from a fill is
 * appended to it in place (outq_append), so decoding stays on it. */
static bool h2_all_decoded(const struct h2_stream *st)
{
	const struct outq *q = &st->out;

	return st->norm_idx >= q->cnt ||
	       (st->norm_idx == q->cnt - 1 && st->norm_off == q->iov[q->cnt - 1].iov_len);
}

/* Decode what the request queued since last time into body segments. */
static int h2_decode(struct h2_stream *st)
{
	struct outq *q = &st->out;

	while (st->norm_idx < q->cnt && st->seg_w < H2_SEGS && !st->eof) {
		const char *p = (const char *)q->iov[st->norm_idx].iov_base + st->norm_off;
		size_t n = q->iov[st->norm_idx].iov_len - st->norm_off;
		size_t used = n;

		if (n == 0) {
			if (st->norm_idx + 1 >= q->cnt)
				break;          /* the last slice: it may grow */
			st->norm_idx++;
			st->norm_off = 0;
			continue;
		}
		if (st->dechunk) {
			size_t off, dn;
			ssize_t r = http1_chunked_decode(&st->ck, p, n, &off, &dn);

			if (r < 0)
				return -1;
			if (r == 0)
				return 0;       /* a line cut across slices: not ours */
			used = (size_t)r;
			if (dn > 0)
				st->segs[st->seg_w++] = (struct h2_seg){ p + off, dn, st->norm_idx };
			if (st->ck.done)
				st->eof = true;
		} else {
			if (st->body_left > 0 && n > st->body_left)
				n = used = (size_t)st->body_left;
			st->segs[st->seg_w++] = (struct h2_seg){ p, n, st->norm_idx };
			if (st->body_left > 0) {
				st->body_left -= n;
				if (st->body_left == 0)
					st->eof = true;
			}
		}
		st->norm_off += used;
	}
	return 0;
}

/* The request's slices that are out of the socket (or copied by nghttp2)
 * leave its queue: those before the first segment still to send, and all
 * of them once every byte was decoded and sent. Returns whether the queue
 * emptied. */
static bool h2_release(struct h2_stream *st)
{
	struct outq *q = &st->out;
	int upto;

	if (st->seg_r == st->seg_w && h2_all_decoded(st)) {
		while (q->idx < q->cnt) {
			q->sent += q->iov[q->idx].iov_len;
			q->idx++;
		}
		q->idx = q->cnt = 0;
		st->norm_idx = 0;
		st->norm_off = 0;
		return true;
	}
	upto = st->seg_r < st->seg_w ? st->segs[st->seg_r].src : st->norm_idx;
	while (q->idx < upto) {
		q->sent += q->iov[q->idx].iov_len;
		q->idx++;
	}
	return false;
}

/* Turn what the request queued into frames: its head, then its body's
 * slices; the data source is woken when it waits for them. */
static void h2_stream_pump(struct h2_stream *st)
{
	struct h2_conn *hc = st->hc;

	if (st->closed || hc->closed)
		return;
	if (!st->head_out) {
		int r = h2_head(st);

		if (r < 0) {
			nghttp2_submit_rst_stream(hc->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
			return;
		}
		if (r == 0)
			return;
	}
	if (st->has_body && h2_decode(st) < 0) {
		nghttp2_submit_rst_stream(hc->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
		return;
	}
	if (st->done && h2_all_decoded(st))
		st->eof = true;         /* a body that ended with the request */
	if (st->deferred && (st->seg_r < st->seg_w || st->eof)) {
		st->deferred = false;
		nghttp2_session_resume_data(hc->s, st->id);
	}
}

/* ---- the request's view of the stream (req_client_ops) ---------------------------- */

static struct h2_stream *h2_st(struct client *c)
{
	return (struct h2_stream *)(void *)c;
}

static void h2_enter(struct h2_conn *hc)
{
	hc->busy++;
}

static int h2_req_send(struct client *c)
{
	struct h2_stream *st = h2_st(c);
	struct h2_conn *hc = st->hc;
	int rc;

	if (hc->closed || st->reset)
		return -1;
	h2_enter(hc);
	h2_stream_pump(st);
	/* a small response from outside the connection's own handlers (a
	 * backend's answer) is framed now, its body copied, so it is drained
	 * in this call as on HTTP/1.1: its backend connection goes back to
	 * the pool without a pause of its read event and a turn of the loop;
	 * the socket write comes at the end of the turn, one for the
	 * responses of many streams. Larger ones, and those answered inside
	 * a handler (hits), are framed when the connection flushes, where
	 * nghttp2 orders the ready streams by their priority (RFC 9218) */
	if (hc->busy == 1 && st->small && st->head_out && !hc->flushing) {
		if (h2_frames(hc) < 0)
			h2_close_now(hc);
		else if (!hc->closed && hc->wlen + H2_FRAME_ROOM > H2_WBUF &&
			 !(st->seg_r == st->seg_w && h2_all_decoded(st)))
			h2_flush(hc);   /* the buffer is full: out now, the rest framed */
	}
	if (!hc->closed && !st->in_wq && st->seg_r == st->seg_w && h2_all_decoded(st) && h2_release(st)) {
		st->drain_due = false;
		rc = 1;
	} else {
		st->waiting = true;
		rc = 0;
	}
	h2_op_leave(hc);
	return rc;
}

/* A backend's final response head (req_client_ops.head): made into
 * HEADERS from its parsed fields, as http1_response_fields gives them,
 * without writing it in HTTP/1.1 form and parsing that again. The fields
 * are copied into the stream's scratch, the names lowercased, and handed
 * to nghttp2 without its own copy (NGHTTP2_NV_FLAG_NO_COPY_*: its copy
 * lowercased names a byte at a time, 2,300 instructions a forward): the
 * scratch outlives the HEADERS, as the stream outlives nghttp2's closing
 * it. The access log's bytes count the fields as the HTTP/1.1 head would
 * have them. */
static int h2_req_head(struct client *c, const struct http1_msg *m, const struct http1_fwd_resp *f)
{
	struct h2_stream *st = h2_st(c);
	struct http1_field sf[H2_NV_STACK], *fl = sf;
	nghttp2_nv snv[H2_NV_STACK + 1], *nv = snv;
	size_t max = m->nheaders + 8, vals = 32 + f->via.len;
	size_t copy = 64 + f->backend_hdr.len + f->backend_name.len + f->extra.len + f->via.len;
	size_t bytes = 17 + m->reason.len;
	char *p;
	int n, rc = -1;

	if (st->hc->closed || st->reset)
		return 0;       /* the request ends at its next send */
	for (unsigned i = 0; i < m->nheaders; i++) {
		copy += m->headers[i].name.len + m->headers[i].value.len;
		if (m->headers[i].flags & HTTP1_HDR_GENERATED)
			vals += m->headers[i].value.len + 2;
	}
	if (!h2_fit(st, &st->scratch, &st->scratch_cap, vals + copy + vals,
		    h2_scratch_most(st->hc->w->snap->conf)))
		return -1;
	if (max > H2_NV_STACK && (!(fl = malloc(max * sizeof(*fl))) || !(nv = malloc((max + 1) * sizeof(*nv)))))
		goto out;
	n = http1_response_fields(m, f, fl, (int)max, st->scratch, vals);
	if (n < 0)
		goto out;
	p = st->scratch + vals;
	for (int i = 0; i < n; i++) {
		size_t nl = fl[i].name.len, vl = fl[i].value.len;

		/* the keys from the field where it lies: read back from the
		 * copy just written, the words straddled the stores and
		 * waited for them (store forwarding fails) */
		uint8_t flag = h2_index_flag(st->hc, fl[i].name.p, nl, fl[i].value.p, vl);

		h2_lower(p, fl[i].name.p, nl);
		memcpy(p + nl, fl[i].value.p, vl);
		nv[i + 1] = (nghttp2_nv){ (uint8_t *)p, (uint8_t *)p + nl, nl, vl,
					  NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE | flag };
		p += nl + vl;
		bytes += nl + vl + 4;
	}
	st->out.sent += bytes;
	rc = h2_submit(st, m->status, m->framing, m->content_length, nv, (size_t)n + 1);
out:
	if (fl != sf)
		free(fl);
	if (nv != snv)
		free(nv);
	return rc;
}

/* A backend's interim response (req_client_ops.interim): a 103 Early
 * Hints (browsers act on it over HTTP/2, not over HTTP/1.1) goes as a
 * HEADERS frame before the final one, its fields as the HTTP/1.1 client
 * would get them (http1_response_fields, with nothing of ours added);
 * nghttp2 copies and lowercases them. A 100 is not relayed: the request's
 * Expect never reaches the backend (h2_on_header). More fields than
 * H2_NV_STACK: dropped, as a 1xx may be. */
static void h2_req_interim(struct client *c, const struct http1_msg *m)
{
	struct h2_stream *st = h2_st(c);
	struct h2_conn *hc = st->hc;
	struct http1_fwd_resp f;
	struct http1_field fl[H2_NV_STACK];
	nghttp2_nv nv[H2_NV_STACK + 1];
	char status[4], scratch[256];
	int n;

	if (m->status == 100 || hc->closed || st->reset || st->closed || st->head_out)
		return;
	memset(&f, 0, sizeof(f));
	n = http1_response_fields(m, &f, fl, H2_NV_STACK, scratch, sizeof(scratch));
	if (n < 0)
		return;
	snprintf(status, sizeof(status), "%d", m->status);
	nv[0] = (nghttp2_nv){ (uint8_t *)":status", (uint8_t *)status, 7, 3, NGHTTP2_NV_FLAG_NONE };
	for (int i = 0; i < n; i++)
		nv[i + 1] = (nghttp2_nv){ (uint8_t *)fl[i].name.p, (uint8_t *)fl[i].value.p, fl[i].name.len,
					  fl[i].value.len, NGHTTP2_NV_FLAG_NONE };
	h2_enter(hc);
	nghttp2_submit_headers(hc->s, NGHTTP2_FLAG_NONE, st->id, NULL, nv, (size_t)n + 1, NULL);
	h2_op_leave(hc);
}

static void h2_req_resume(struct client *c)
{
	struct h2_stream *st = h2_st(c);
	size_t keep = req_keep_from(&st->rq);

	/* what the backend took leaves the buffer, and the window opens by
	 * as much body as left it */
	if (keep > 0) {
		size_t credit = keep > st->head_left ? keep - st->head_left : 0;

		memmove(st->in.data, st->in.data + keep, st->in.len - keep);
		st->in.len -= keep;
		req_rebase(&st->rq, keep);
		st->head_left = keep >= st->head_left ? 0 : st->head_left - keep;
		if (credit && !st->closed && !st->hc->closed) {
			h2_enter(st->hc);
			nghttp2_session_consume(st->hc->s, st->id, credit);
			h2_op_leave(st->hc);
		}
	}
}

static void h2_req_body_taken(struct client *c)
{
	(void)c;
}

static void h2_req_done(struct client *c)
{
	struct h2_stream *st = h2_st(c);
	struct h2_conn *hc = st->hc;

	h2_enter(hc);
	if (st->ended) {
		/* the posted wake-up a request that ended waited for came
		 * (req_on_wake, which does nothing after this): the stream,
		 * and a closed connection with its last stream, may go now */
		st->wake_due = false;
		h2_due(st);
		h2_leave(hc);
		return;
	}
	h2_stream_unwork(st);
	st->done = true;
	h2_stream_pump(st);
	h2_op_leave(hc);
}

/* The request asks for its connection to close: in HTTP/2 that is its
 * stream (a response broken after it began). The request ends now. */
static void h2_req_close(struct client *c)
{
	struct h2_stream *st = h2_st(c);
	struct h2_conn *hc = st->hc;

	h2_enter(hc);
	if (!st->closed && !hc->closed)
		nghttp2_submit_rst_stream(hc->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
	st->reset = true;
	if (!st->ended) {
		st->ended = true;
		st->wake_due = !req_end(&st->rq);
		h2_due(st);
	}
	h2_op_leave(hc);
}

static const struct req_client_ops h2_req_ops = {
	.send = h2_req_send,
	.resume = h2_req_resume,
	.body_taken = h2_req_body_taken,
	.done = h2_req_done,
	.close = h2_req_close,
	.head = h2_req_head,
	.interim = h2_req_interim,
};

/* ---- the connection's work: start, feed, end streams; write --------------------- */

/* Start a stream whose head is complete: a request like an HTTP/1.1
 * client's, through the same parser. */
static void h2_stream_start(struct h2_stream *st)
{
	struct h2_conn *hc = st->hc;
	struct worker *w = hc->w;
	const struct conf *conf = w->snap->conf;
	struct http1_limits lim;
	ssize_t r;

	st->started = true;
	worker_count(&w->h2_streams);
	if (hc->cleartext)
		worker_count(&w->h2c_streams);
	req_h2_stream(&st->rq, (uint32_t)st->id);
	if (++hc->requests == conf->h2_max_requests && !hc->goaway) {
		/* graceful: this stream is the last one served */
		nghttp2_submit_goaway(hc->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_NO_ERROR, NULL, 0);
		hc->goaway = true;
		hc->goaway_last = st->id;
		h2_count(hc, &w->proxy->h2_goaway_max_requests);
	}
	if (!st->nomem && st->hdrs_cap < st->fields + 3 && !st->too_big) {
		/* the regular fields, and Host, Cookie, Transfer-Encoding */
		unsigned n = st->fields + 3 < 32 ? 32 : st->fields + 3;
		struct http1_header *h = realloc(st->hdrs, n * sizeof(*h));

		if (h) {
			st->hdrs = h;
			st->hdrs_cap = n;
		}
		st->nomem = !h;
	}
	if (st->nomem) {
		req_refuse(&st->rq, worker_next_rid(w), 503, "out of memory for an HTTP/2 request head");
		return;
	}
	if (st->too_big) {
		h2_count(hc, &w->proxy->h2_headers_refused);
		h2_glitch(hc);
		req_refuse(&st->rq, worker_next_rid(w), 431, "HTTP/2 header block over max_headers or max_head_size");
		return;
	}
	lim.max_head = st->in.len;
	lim.max_headers = st->hdrs_cap < conf->max_headers ? st->hdrs_cap : conf->max_headers;
	r = http1_parse_request(&st->rq.msg, st->hdrs, st->in.data, st->in.len, &lim);
	if (r <= 0) {
		req_refuse(&st->rq, worker_next_rid(w), r < 0 ? (int)-r : 400,
			   st->rq.msg.error ? st->rq.msg.error : "bad request");
		return;
	}
	if (st->rq.msg.framing != HTTP1_BODY_NONE && st->in.cap < h2_body_most(conf)) {
		/* room for the body's window: the head's slices move */
		size_t nc = h2_body_most(conf);
		char *d = realloc(st->in.data, nc);

		if (!d) {
			req_refuse(&st->rq, worker_next_rid(w), 503, "out of memory for a request body");
			return;
		}
		st->in.data = d;
		st->in.cap = nc;
		http1_msg_init(&st->rq.msg);
		r = http1_parse_request(&st->rq.msg, st->hdrs, st->in.data, st->in.len, &lim);
	}
	req_begin(&st->rq, (size_t)r, worker_next_rid(w));
	req_serve(&st->rq);
}

/* What a stream's flags ask for: start it, feed it, release what went
 * out, end it, free it. Returns whether it did something. */
static bool h2_settle_one(struct h2_conn *hc, struct h2_stream *st)
{
	bool did = false;

	if (st->ready && !st->started && !st->reset && !hc->closed) {
		if (hc->goaway && st->id > hc->goaway_last) {
			/* came with the frames that made the GOAWAY:
			 * not served, the client may retry it */
			nghttp2_submit_rst_stream(hc->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_REFUSED_STREAM);
			st->reset = true;
		} else {
			h2_stream_start(st);
		}
		did = true;
	}
	if (st->data_due && st->started && !st->ended) {
		st->data_due = false;
		req_client_data(&st->rq);
		did = true;
	}
	/* the slices out of the socket leave the request's queue and
	 * it hears so in one step: in between, its backend side
	 * would take an empty queue for a response all sent */
	if (st->drain_due && !st->ended) {
		st->drain_due = false;
		if (h2_release(st) && st->waiting) {
			st->waiting = false;
			req_client_drained(&st->rq);
			did = true;
		} else if (!h2_all_decoded(st)) {
			h2_stream_pump(st);     /* room for more segments */
		}
	}
	if ((st->closed || hc->closed) && !st->ended && !st->in_wq) {
		st->ended = true;
		st->wake_due = !req_end(&st->rq);
		did = true;
	}
	/* not while it is on the list again (it set a flag just now):
	 * the list's next round frees it */
	if ((st->closed || hc->closed) && st->ended && !st->wake_due && !st->in_wq && !st->on_due) {
		if (!st->closed)
			nghttp2_session_set_stream_user_data(hc->s, st->id, NULL);
		h2_stream_free(st);
		did = true;
	}
	return did;
}

/* One round over the streams with work (h2_due's list; all of them when
 * due_all is set): start those whose head came, give the request its new
 * body bytes, end those the session closed, free those done with.
 * Returns whether it did anything. */
static bool h2_settle(struct h2_conn *hc)
{
	bool did = false;
	struct h2_stream *st, *next;

	if (!hc->due_first && !hc->due_all)
		return false;
	/* work found on the way goes on the list again: the caller's next
	 * round */
	st = hc->due_first;
	hc->due_first = hc->due_last = NULL;
	if (hc->due_all) {
		/* every stream, whatever its flags said */
		hc->due_all = false;
		for (; st; st = st->due_next)
			st->on_due = false;
		for (st = hc->streams; st; st = next) {
			next = st->next;
			did |= h2_settle_one(hc, st);
		}
		return did;
	}
	for (; st; st = next) {
		next = st->due_next;
		st->on_due = false;
		did |= h2_settle_one(hc, st);
	}
	return did;
}

/* Frames from nghttp2 into the output queue while it has room (none
 * written to the socket): 0, or -1 when the session failed or no buffer
 * could be had (the caller closes). */
static int h2_frames(struct h2_conn *hc)
{
	if (!hc->wo) {
		/* an idle connection holds none (h2_idle_trim) */
		if (!nghttp2_session_want_write(hc->s))
			return 0;
		if (h2_wout_new(hc) < 0)
			return -1;
	}
	while (hc->wlen + H2_FRAME_ROOM <= H2_WBUF && hc->wo->q.cnt + H2_FRAME_SLICES < OUT_IOV_MAX) {
		const uint8_t *p;
		ssize_t n = nghttp2_session_mem_send(hc->s, &p);

		if (n < 0)
			return -1;
		if (n == 0)
			break;
		if (hc->wlen + (size_t)n > H2_WBUF) {
			log_warn("HTTP/2: a frame of %zd bytes past the output buffer; closing", n);
			return -1;
		}
		memcpy(hc->wo->buf + hc->wlen, p, (size_t)n);
		outq_append(&hc->wo->q, hc->wo->buf + hc->wlen, (size_t)n);
		hc->wlen += (size_t)n;
	}
	return 0;
}

/* Frames out: from nghttp2 into the output queue while it has room, the
 * queue to the socket; once all of it is out, the streams whose slices
 * were in it hear so. */
static void h2_flush(struct h2_conn *hc)
{
	if (hc->closed)
		return;
	if (hc->flushing) {
		hc->flush_again = true;
		return;
	}
	hc->flushing = true;
	do {
		int rc;

		hc->flush_again = false;
		if (h2_frames(hc) < 0) {
			hc->flushing = false;
			h2_close_now(hc);
			return;
		}
		if (h2_wq_empty(hc))
			break;
		rc = h2_io_flush(hc);
		if (rc < 0) {
			hc->flushing = false;
			h2_close_now(hc);
			return;
		}
		if (rc == 0) {
			if (!hc->writing) {
				event_add(&hc->c->wev, NULL);
				hc->writing = true;
			}
			break;
		}
		/* all out: the buffer is free, and the streams' slices too */
		hc->wlen = 0;
		outq_reset(&hc->wo->q);
		hc->stuck_since = 0;
		for (struct h2_stream *st = hc->wq_first, *next; st; st = next) {
			next = st->wq_next;
			st->in_wq = false;
			st->drain_due = true;
			h2_due(st);
		}
		hc->wq_first = NULL;
		hc->flush_again = true;
	} while (hc->flush_again && !hc->closed);
	if (hc->writing && h2_wq_empty(hc)) {
		event_del(&hc->c->wev);
		hc->writing = false;
	}
	hc->flushing = false;
}

static void h2_read_pause(struct h2_conn *hc, bool pause)
{
	if (pause == hc->read_paused || hc->closed)
		return;
	if (pause)
		event_del(&hc->c->rev);
	else
		event_add(&hc->c->rev, NULL);
	hc->read_paused = pause;
}

/* The way out of every handler: the work the handler made possible, in
 * rounds, then whether the connection is over. */
static void h2_leave(struct h2_conn *hc)
{
	if (hc->busy == 1) {
		for (int round = 0; round < H2_ROUNDS; round++) {
			bool did = h2_settle(hc);

			h2_flush(hc);
			did |= h2_settle(hc);
			if (!did)
				break;
		}
		if (!hc->closed) {
			/* a stream keeps its place until its request let go:
			 * while all are taken, no new frame is read */
			h2_read_pause(hc, hc->working >= hc->max_streams || hc->fatal);
			/* bytes OpenSSL decrypted already raise no socket
			 * event: read them at the next turn */
			if (!hc->read_paused && hc->ssl && tls_pending(hc->ssl))
				event_active(&hc->c->rev, EV_READ, 1);
			if (!hc->ticking && hc->nstreams > 0) {
				deadline_set(&hc->c->tev, H2_TICK_US);
				hc->ticking = true;
			} else if (hc->nstreams == 0 && !hc->trim_due && (hc->rbuf || hc->wo)) {
				/* idle with what a burst left (its streams' buffers,
				 * kept for the next burst): given back soon, by the
				 * tick's h2_idle_trim, not at the idle timeout. Once:
				 * set again at each turn, the timer would never come */
				deadline_set(&hc->c->tev, H2_TRIM_US);
				hc->ticking = true;
				hc->trim_due = true;
			}
			/* an error (or a flood) ends the connection once its
			 * GOAWAY is out, whatever its streams were doing; a
			 * graceful GOAWAY once they are done. So does a session
			 * nghttp2 is done with, with nothing left to write: a
			 * connection error it found itself (a frame over the
			 * size limit) sent its GOAWAY and it sends nothing more,
			 * so streams still answering would wait for ever, the
			 * socket unread while they hold every place */
			if ((hc->fatal || (hc->goaway && hc->nstreams == 0)) && h2_wq_empty(hc) &&
			    !nghttp2_session_want_write(hc->s))
				h2_close_now(hc);
			else if (!nghttp2_session_want_read(hc->s) && !nghttp2_session_want_write(hc->s) &&
				 h2_wq_empty(hc))
				h2_close_now(hc);
		}
	}
	if (--hc->busy == 0 && hc->closed && hc->nstreams == 0) {
		struct client *c = hc->c;
		struct worker *w = hc->w;

		deadline_stop(&c->tev);
		nghttp2_session_del(hc->s);
		if (hc->ssl) {
			tls_free(hc->ssl);
			c->ssl = NULL;
		}
		free(hc->rbuf);
		free(hc->wo);
		free(hc);
		c->h2 = NULL;
		worker_client_put(w, c);
	}
}

/* The way out of the request's calls into the stream (its ops): frames
 * out, but no request is started, told or ended from here, since the
 * caller is in the middle of its own handling (forward.c relaying, the
 * cache waking): what is due runs at the next turn, from the timer. */
static void h2_op_leave(struct h2_conn *hc)
{
	if (hc->busy == 1 && !hc->closed) {
		/* the write (h2_on_event's EV_WRITE) runs after the events
		 * already due in this turn: the frames of every stream a
		 * backend answered in it go out in one system call */
		if (!h2_wq_empty(hc) || nghttp2_session_want_write(hc->s))
			event_active(&hc->c->wev, EV_WRITE, 1);
		if (hc->due_first || hc->due_all || hc->closed)
			deadline_set(&hc->c->tev, 0);
	}
	hc->busy--;
}

/* Close the socket; the streams' requests end (h2_settle), and the
 * connection goes with its last stream. */
static void h2_close_now(struct h2_conn *hc)
{
	struct client *c = hc->c;

	if (hc->closed)
		return;
	hc->closed = true;
	hc->due_all = true;
	event_del(&c->rev);
	event_del(&c->wev);
	if (hc->ssl) {
		/* close_notify once after a clean run; the session is freed
		 * with the connection, after its streams' log lines (which
		 * name its SNI) */
		tls_shutdown(hc->ssl);
		atomic_fetch_sub(&hc->w->proxy->tls_conns, 1);
	}
	close(hc->fd);
	hc->fd = c->fd = -1;
	c->closed = true;
	worker_conn_closed(hc->w);
	/* the output is dropped: no slice of a stream is held any more; the
	 * streams end at the next turn (or as the handler running unwinds) */
	for (struct h2_stream *st = hc->wq_first; st; st = st->wq_next)
		st->in_wq = false;
	hc->wq_first = NULL;
	deadline_set(&c->tev, 0);
}

/* ---- events ----------------------------------------------------------------------- */

static void h2_read(struct h2_conn *hc)
{
	ssize_t n;

	if (hc->pend > 0) {
		n = (ssize_t)hc->pend;
		hc->pend = 0;
	} else {
		if (!hc->rbuf) {
			hc->rcap = H2_RBUF;
			hc->rbuf = malloc(hc->rcap);
			if (!hc->rbuf) {
				h2_close_now(hc);
				return;
			}
		}
		n = h2_io_recv(hc, hc->rbuf, hc->rcap);
		/* TLS gives a record a read: the records OpenSSL holds
		 * already (it reads ahead) are taken in the same turn, as a
		 * plain read takes all the socket has. An end or an error
		 * met on the way is met again at the next turn's read */
		while (n > 0 && hc->ssl && (size_t)n < hc->rcap && tls_pending(hc->ssl)) {
			ssize_t more = h2_io_recv(hc, hc->rbuf + n, hc->rcap - (size_t)n);

			if (more <= 0) {
				if (more == 0 || (errno != EAGAIN && errno != EINTR))
					event_active(&hc->c->rev, EV_READ, 1);
				break;
			}
			n += more;
		}
	}

	if (n > 0) {
		ssize_t r = nghttp2_session_mem_recv(hc->s, (const uint8_t *)hc->rbuf, (size_t)n);

		hc->last_active = deadline_now_us();
		if (r < 0) {
			/* nghttp2 queued its GOAWAY for a connection error:
			 * it goes out, then the connection closes */
			if (!hc->fatal)
				h2_count(hc, r == NGHTTP2_ERR_FLOODED || r == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS ?
					 &hc->w->proxy->h2_goaway_calm :
					 &hc->w->proxy->h2_goaway_error);
			/* a GOAWAY if nghttp2 queued none (a flood of
			 * CONTINUATION frames, a header block it could not
			 * decode): no-op otherwise */
			nghttp2_session_terminate_session(hc->s, r == NGHTTP2_ERR_FLOODED ||
							  r == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS ?
							  NGHTTP2_ENHANCE_YOUR_CALM : NGHTTP2_PROTOCOL_ERROR);
			hc->fatal = true;
			if (worker_log_allow(hc->w, 100))
				log_info("HTTP/2: connection from %s ends: %s", hc->ip, nghttp2_strerror((int)r));
			if (r == NGHTTP2_ERR_BAD_CLIENT_MAGIC)
				h2_close_now(hc);
		}
		return;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	h2_close_now(hc);
}

/* An idle connection (no stream, nothing to write) gives back its
 * buffers and its frame buffer's pages: most of a browser's
 * connections are idle most of the time. */
static void h2_idle_trim(struct h2_conn *hc)
{
	if (hc->nstreams > 0 || !h2_wq_empty(hc) || hc->pend > 0 || hc->flushing)
		return;
	free(hc->rbuf);
	hc->rbuf = NULL;
	free(hc->wo);
	hc->wo = NULL;
	hc->delivered = 0;
	hc->stuck_since = 0;
	h2_big_release(hc);
	hc->wlen = 0;
}

/* A stream's clock of no progress: started again at each progress (a
 * peer slow but steady is not stalled: bytes counts what moved, over the
 * stream's life). True once it has run limit_us, when the caller resets
 * the stream with CANCEL and counts it; the clock stops then. */
static bool h2_no_progress(int64_t *since, uint64_t *mark, uint64_t bytes, int64_t now, int64_t limit_us)
{
	if (*since == 0 || bytes != *mark) {
		*since = now;
		*mark = bytes;
		return false;
	}
	if (now - *since < limit_us)
		return false;
	*since = 0;
	return true;
}

/* Once a tick: a request body that has not moved for client_timeout
 * while the client could send it (its stream's window and the
 * connection's open) resets its stream, as a stalled HTTP/1.1 upload
 * closes its connection: the backend connection it holds goes with it. A
 * body the backend does not take yet keeps the window shut: not the
 * client's stall, not counted. */
static void h2_body_stalls(struct h2_conn *hc, int64_t now)
{
	int64_t client_us = (int64_t)hc->w->snap->conf->client_timeout_ms * 1000;
	bool conn_open = nghttp2_session_get_local_window_size(hc->s) > 0;

	for (struct h2_stream *st = hc->streams; st; st = st->next) {
		if (!st->started || st->in_end || st->closed || st->reset || !conn_open ||
		    nghttp2_session_get_stream_local_window_size(hc->s, st->id) <= 0) {
			st->body_since = 0;
			continue;
		}
		if (h2_no_progress(&st->body_since, &st->body_mark, st->body_got, now, client_us)) {
			h2_count(hc, &hc->w->proxy->h2_body_timeouts);
			nghttp2_submit_rst_stream(hc->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
		}
	}
}

/* Once a tick: streams whose response the client's window holds back
 * past [h2] send_timeout are reset; a connection whose output the client
 * has not taken for a whole client_timeout is closed (false then). */
static bool h2_stalls(struct h2_conn *hc, int64_t now)
{
	const struct conf *conf = hc->w->snap->conf;
	int64_t send_us = (int64_t)conf->h2_send_timeout_ms * 1000;
	int32_t cwin = nghttp2_session_get_remote_window_size(hc->s);

	/* a stream whose ready bytes the client's window keeps back */
	for (struct h2_stream *st = hc->streams; st; st = st->next) {
		if (st->closed || st->reset || !st->head_out || st->seg_r == st->seg_w) {
			st->stall_since = 0;
			continue;
		}
		if (cwin > 0 && nghttp2_session_get_stream_remote_window_size(hc->s, st->id) > 0) {
			st->stall_since = 0;
			continue;
		}
		/* a reader that opens its window slowly but steadily is
		 * not stalled */
		if (h2_no_progress(&st->stall_since, &st->stall_mark, st->sent_bytes, now, send_us)) {
			h2_count(hc, &hc->w->proxy->h2_send_timeouts);
			nghttp2_submit_rst_stream(hc->s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
		}
	}
	h2_body_stalls(hc, now);
	/* a client that reads nothing: output stuck a whole client_timeout */
	if (!h2_wq_empty(hc)) {
		long q = conn_unacked(hc->fd);
		uint64_t acked = q >= 0 && (uint64_t)q <= hc->wo->q.sent ? hc->wo->q.sent - (uint64_t)q : 0;

		if (acked != hc->delivered || hc->stuck_since == 0) {
			hc->delivered = acked;
			hc->stuck_since = now;
		} else if (now - hc->stuck_since >= (int64_t)conf->client_timeout_ms * 1000) {
			h2_close_now(hc);
			return false;
		}
	}
	return true;
}

/* The connection's timer: its ticks, its idle timeout, its trim, and
 * the kicks (deadline 0) that run h2_settle at the next turn. The walks
 * over every stream are once a tick, not once a kick: under load a kick
 * comes with most backend answers. */
static void h2_timer(struct h2_conn *hc)
{
	if (hc->closed)
		return;

	const struct conf *conf = hc->w->snap->conf;
	int64_t now = deadline_now_us();

	if (hc->nstreams == 0 && h2_wq_empty(hc)) {
		if (now - hc->last_active >= (int64_t)conf->h2_idle_timeout_ms * 1000 || hc->fatal || hc->goaway) {
			if (!hc->goaway && !hc->fatal) {
				h2_count(hc, &hc->w->proxy->h2_goaway_idle);
				nghttp2_submit_goaway(hc->s, NGHTTP2_FLAG_NONE,
						      nghttp2_session_get_last_proc_stream_id(hc->s), NGHTTP2_NO_ERROR,
						      NULL, 0);
			}
			hc->fatal = true;
		}
	}
	if (now >= hc->tick_at) {
		hc->tick_at = now + H2_TICK_US;
		/* and h2_settle walks the streams once a tick, whatever
		 * the flags said */
		hc->due_all = true;
		if (!h2_stalls(hc, now))
			return;
	}
	if (hc->trim_due && hc->nstreams == 0 && h2_wq_empty(hc) && now - hc->last_active < H2_TRIM_US) {
		/* frames came since the trim was armed: a connection in use
		 * (a client asking one thing at a time) keeps its buffers
		 * until it has been idle that long */
		deadline_set(&hc->c->tev, H2_TRIM_US - (now - hc->last_active));
		return;
	}
	h2_idle_trim(hc);
	hc->trim_due = false;
	hc->ticking = hc->nstreams || !h2_wq_empty(hc);
	deadline_set(&hc->c->tev, hc->ticking ? (hc->tick_at > now ? hc->tick_at - now : 0) :
			     (int64_t)conf->h2_idle_timeout_ms * 1000);
}

static void h2_on_event(evutil_socket_t fd, short what, void *arg)
{
	struct client *c = arg;
	struct h2_conn *hc = c->h2;
	int64_t outer = deadline_turn_begin();

	(void)fd;
	h2_enter(hc);
	if (what & EV_TIMEOUT) {
		if (deadline_fired(&c->tev) && !hc->closed)
			h2_timer(hc);
	} else if (what & EV_READ) {
		if (!hc->closed)
			h2_read(hc);
	} else if (!hc->closed) {
		h2_flush(hc);
	}
	h2_leave(hc);
	deadline_turn_end(outer);
}

/* ---- the entry points ----------------------------------------------------------- */

/* The session's callbacks (nghttp2 copies them: the caller deletes the
 * set once the session is made). NULL: out of memory. */
static nghttp2_session_callbacks *h2_callbacks(void)
{
	nghttp2_session_callbacks *cbs;

	if (nghttp2_session_callbacks_new(&cbs) != 0)
		return NULL;
	nghttp2_session_callbacks_set_on_begin_frame_callback(cbs, h2_on_begin_frame);
	nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, h2_on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cbs, h2_on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, h2_on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, h2_on_data_chunk);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs, h2_on_stream_close);
	nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cbs, h2_on_invalid_frame);
	nghttp2_session_callbacks_set_send_data_callback(cbs, h2_send_data);
	nghttp2_session_callbacks_set_on_extension_chunk_recv_callback(cbs, h2_on_ext_chunk);
	nghttp2_session_callbacks_set_unpack_extension_callback(cbs, h2_unpack_ext);
	return cbs;
}

/* The session's options: our limits, and what nghttp2 does for us. */
static void h2_options(nghttp2_option *opt, const struct conf *conf)
{
	/* the request body's window opens as the backend takes it
	 * (h2_req_resume), not as it arrives */
	nghttp2_option_set_no_auto_window_update(opt, 1);
	nghttp2_option_set_max_continuations(opt, 8);
	/* nghttp2's own reset limit stays behind ours (h2_early_reset) */
	nghttp2_option_set_stream_reset_rate_limit(opt, 4 * conf->h2_max_streams + 1000, 33);
	nghttp2_option_set_max_settings(opt, 32);
	nghttp2_option_set_max_outbound_ack(opt, 1000);
	/* closed streams are kept only for RFC 7540's priority tree, which
	 * SETTINGS_NO_RFC7540_PRIORITIES turns off: without this, nghttp2
	 * keeps up to max_concurrent_streams of them on an idle connection */
	nghttp2_option_set_no_closed_streams(opt, 1);
	/* responses' fields are coded with a dynamic table of 2 KiB, not
	 * the 4 KiB default: a full 4 KiB table cost each connection ~12 KB
	 * for as long as it lived, idle or not. Counted in instructions a
	 * forward (callgrind, h2load 10x100, the test cache's 14 fields):
	 * no table 41.0k (every field Huffman-coded), 512 B 50.8k (each
	 * response's new values evict the fields that repeat), 1 KiB
	 * 35.8k, 2 KiB 36.0k, 4 KiB 38.5k (longer searches). 2 KiB keeps
	 * room for a tier's fields that repeat (type, cache-control, via,
	 * the backend's name) beside those that change every response */
	nghttp2_option_set_max_deflate_dynamic_table_size(opt, 2048);
	/* frames of unknown types reach h2_on_begin_frame (glitches) only as
	 * extension types of ours; their payloads are dropped */
	for (unsigned type = 0x0a; type <= 0xff; type++)
		if (type != NGHTTP2_PRIORITY_UPDATE)
			nghttp2_option_set_user_recv_extension_type(opt, (uint8_t)type);
	/* RFC 9218's PRIORITY_UPDATE is nghttp2's to apply, but only when
	 * asked: without this it drops them unseen (a browser's reordering
	 * lost, and a flood of them counted nowhere) */
	nghttp2_option_set_builtin_recv_extension_type(opt, NGHTTP2_PRIORITY_UPDATE);
}

int h2_start(struct client *c, int fd, struct ssl_st *ssl, const char *peer, const void *data, size_t n)
{
	struct worker *w = c->w;
	const struct conf *conf = w->snap->conf;
	nghttp2_session_callbacks *cbs = h2_callbacks();
	nghttp2_option *opt = NULL;
	struct h2_conn *hc;
	nghttp2_settings_entry iv[5];

	if (!cbs)
		return -1;
	hc = calloc(1, sizeof(*hc));
	if (!hc) {
		nghttp2_session_callbacks_del(cbs);
		return -1;
	}
	hc->c = c;
	hc->w = w;
	hc->fd = fd;
	w->free_h2.release = h2_stream_link_release;
	hc->ssl = ssl;
	hc->ip = peer;
	hc->iplen = strlen(peer);
	hc->max_streams = conf->h2_max_streams;
	hc->rcap = n > H2_RBUF ? n : H2_RBUF;
	hc->rbuf = malloc(hc->rcap);
	if (!hc->rbuf || h2_wout_new(hc) < 0 || nghttp2_option_new(&opt) != 0)
		goto fail;
	h2_options(opt, conf);
	hc->mem = (nghttp2_mem){ hc, h2_malloc, h2_free, h2_calloc, h2_realloc };
	if (nghttp2_session_server_new3(&hc->s, cbs, hc, opt, &hc->mem) != 0) {
		hc->s = NULL;
		goto fail;
	}
	nghttp2_session_callbacks_del(cbs);
	cbs = NULL;
	nghttp2_option_del(opt);
	opt = NULL;
	/* SETTINGS first: without them nghttp2 allows any number of streams */
	iv[0] = (nghttp2_settings_entry){ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, conf->h2_max_streams };
	iv[1] = (nghttp2_settings_entry){ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, (uint32_t)conf->h2_window };
	iv[2] = (nghttp2_settings_entry){ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)conf->max_head_size };
	iv[3] = (nghttp2_settings_entry){ NGHTTP2_SETTINGS_ENABLE_PUSH, 0 };
	/* RFC 9218 priorities instead of RFC 7540's tree: nghttp2 then reads
	 * a request's priority field (u=0..7, i) and PRIORITY_UPDATE frames,
	 * and writes the DATA of ready responses lowest urgency first, the
	 * incremental ones of one urgency in turns */
	iv[4] = (nghttp2_settings_entry){ NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1 };
	if (nghttp2_submit_settings(hc->s, NGHTTP2_FLAG_NONE, iv, 5) != 0)
		goto fail;
	/* the connection's own window: streams' windows are what bound us */
	nghttp2_session_set_local_window_size(hc->s, NGHTTP2_FLAG_NONE, 0,
					      (int32_t)(conf->h2_window * conf->h2_max_streams > (1u << 30) ?
							(1u << 30) : conf->h2_window * conf->h2_max_streams));
	hc->last_active = deadline_now_us();
	hc->glitch_since = hc->last_active;
	hc->reset_since = hc->last_active;
	event_del(&c->rev);
	event_del(&c->wev);
	deadline_stop(&c->tev);
	event_assign(&c->rev, w->base, fd, EV_READ | EV_PERSIST, h2_on_event, c);
	event_assign(&c->wev, w->base, fd, EV_WRITE | EV_PERSIST, h2_on_event, c);
	deadline_assign(&c->tev, w->base, h2_on_event, c);
	if (event_add(&c->rev, NULL) < 0)
		goto fail;
	c->writing = false;
	c->read_paused = false;
	c->state = CL_H2;
	c->h2 = hc;
	/* ALPN h2: ours, or a terminator's in front (PROXY v2 ALPN TLV) */
	hc->cleartext = !ssl && !c->alpn_h2;
	h2_count(hc, hc->cleartext ? &w->proxy->h2c_connections : &w->proxy->h2_connections);
	deadline_set(&c->tev, (int64_t)conf->h2_idle_timeout_ms * 1000);
	/* the bytes already read are taken at the next turn, as if read
	 * then: the caller's handler is still running on c. After a TLS
	 * handshake the read runs too: the client's preface may be
	 * decrypted already (no socket event says so), and our SETTINGS go
	 * out as that turn ends, whatever the client sends */
	if (n > 0)
		memcpy(hc->rbuf, data, n);
	hc->pend = n;
	if (n > 0 || ssl)
		event_active(&c->rev, EV_READ, 1);
	return 0;
fail:
	nghttp2_session_callbacks_del(cbs);
	if (opt)
		nghttp2_option_del(opt);
	if (hc->s)
		nghttp2_session_del(hc->s);
	free(hc->rbuf);
	free(hc->wo);
	free(hc);
	return -1;
}

void h2_drain(struct client *c)
{
	struct h2_conn *hc = c->h2;

	if (hc->closed || hc->goaway)
		return;
	h2_enter(hc);
	h2_count(hc, &hc->w->proxy->h2_goaway_shutdown);
	hc->goaway_last = nghttp2_session_get_last_proc_stream_id(hc->s);
	nghttp2_submit_goaway(hc->s, NGHTTP2_FLAG_NONE, hc->goaway_last, NGHTTP2_NO_ERROR, NULL, 0);
	hc->goaway = true;
	h2_leave(hc);
}

void h2_close(struct client *c)
{
	struct h2_conn *hc = c->h2;

	if (!hc)
		return;
	h2_enter(hc);
	h2_close_now(hc);
	if (worker_done(hc->w)) {
		/* the worker's loop is over: no wake-up will come now */
		h2_settle(hc);
		for (struct h2_stream *st = hc->streams; st; st = st->next)
			st->wake_due = false;
		hc->due_all = true;
	}
	h2_leave(hc);
}
