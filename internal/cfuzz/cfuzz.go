//go:build cgo

// Package cfuzz exposes, to the Go fuzz tests of package xtc, every C
// decoder that reads bytes coming from outside the process or from another
// process: the DOWN and EXIT message decoders, the osproc control-socket
// framing (both the child's request reader, xtc_osproc_serve, and the
// parent's reply reader, xtc_osproc_call) and the mailbox path (bytes sent
// to a proc and received back, with the runtime decoders and
// xtc_recv_correlate applied to them). cgo is not allowed in _test.go
// files, hence this internal package; its symbols come from package xtc's
// C objects, linked into the same test binary.
package cfuzz

/*
#cgo CFLAGS: -I${SRCDIR}/../../csrc/include -I${SRCDIR}/../../csrc -D_GNU_SOURCE -std=gnu11
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "xtc.h"
#include "xtc_osproc.h"

typedef struct cfuzz_dec {
	int down_rc, down_ex_rc, exit_rc;
	int consistent; // 1: the decoders agree with each other
} cfuzz_dec;

static void cfuzz_decode(const void *b, size_t n, cfuzz_dec *out)
{
	xtc_pid_t p1 = XTC_PID_NONE, p2 = XTC_PID_NONE;
	int r1 = -12345, r2 = -12345;
	xtc_down_info_t di;

	memset(&di, 0, sizeof di);
	out->down_rc = xtc_down_decode(b, n, &p1, &r1);
	out->down_ex_rc = xtc_down_decode_ex(b, n, &di);
	out->exit_rc = xtc_exit_decode(b, n, &p2, &r2);
	out->consistent = 1;
	if ((out->down_rc == 0) != (out->down_ex_rc == 0))
		out->consistent = 0;
	if (out->down_rc == 0 && (!xtc_pid_eq(p1, di.pid) || r1 != di.reason))
		out->consistent = 0;
	if (out->down_rc == 0 && out->exit_rc == 0)
		out->consistent = 0; // one message cannot be both kinds
	// NULL out pointers are allowed for the plain decoders
	if (xtc_down_decode(b, n, NULL, NULL) != out->down_rc ||
	    xtc_exit_decode(b, n, NULL, NULL) != out->exit_rc)
		out->consistent = 0;
	if (xtc_down_decode_ex(b, n, NULL) == 0)
		out->consistent = 0; // _ex requires out
}

static int cfuzz_echo(const void *req, size_t n, void **rep, size_t *rn,
                      void *arg)
{
	(void)arg;
	*rep = NULL;
	*rn = n;
	if (n == 0)
		return 0;
	*rep = malloc(n);
	if (*rep == NULL)
		return XTC_E_NOMEM;
	memcpy(*rep, req, n);
	return 0;
}

// Feed b to xtc_osproc_serve as the parent's side of the stream (then
// EOF); collect what serve wrote back. Returns serve's code.
static int cfuzz_serve(const void *b, size_t n, void *out, size_t cap,
                       size_t *out_n)
{
	int sv[2], big = 4 << 20, rc;
	size_t got = 0;

	*out_n = 0;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return -1000;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
	setsockopt(sv[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
	setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
	setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
	for (size_t off = 0; off < n;) {
		ssize_t w = write(sv[0], (const char *)b + off, n - off);
		if (w <= 0) {
			close(sv[0]);
			close(sv[1]);
			return -1001;
		}
		off += (size_t)w;
	}
	shutdown(sv[0], SHUT_WR);
	rc = xtc_osproc_serve(sv[1], cfuzz_echo, NULL);
	close(sv[1]);
	for (;;) {
		ssize_t r = read(sv[0], (char *)out + got, cap - got);
		if (r <= 0 || (got += (size_t)r) == cap)
			break;
	}
	close(sv[0]);
	*out_n = got;
	return rc;
}

typedef struct cfuzz_child {
	const void *b;
	size_t n;
} cfuzz_child;

// Child: read the request frame, answer with the fuzz bytes as they are.
static int cfuzz_replier(int fd, void *arg)
{
	cfuzz_child *c = arg;
	char req[16];
	size_t off = 0;

	while (off < 5) { // 4-byte length + 1 byte of request
		ssize_t r = read(fd, req + off, 5 - off);
		if (r <= 0)
			return 1;
		off += (size_t)r;
	}
	for (off = 0; off < c->n;) {
		ssize_t w = write(fd, (const char *)c->b + off, c->n - off);
		if (w <= 0)
			return 2;
		off += (size_t)w;
	}
	return 0;
}

// Parent: one xtc_osproc_call whose reply stream is b. Returns call's
// code; the reply is copied to out.
static int cfuzz_call(const void *b, size_t n, size_t max_reply, void *out,
                      size_t cap, size_t *out_n)
{
	cfuzz_child c = { b, n };
	xtc_osproc_t *p = NULL;
	void *rep = NULL;
	size_t rl = 0;
	int rc, st;

	*out_n = 0;
	rc = xtc_osproc_isolated_spawn("cfuzz", cfuzz_replier, &c, &p);
	if (rc != 0)
		return -1000 + rc;
	rc = xtc_osproc_call(p, "q", 1, &rep, &rl, max_reply, 5000000000LL);
	if (rc == 0) {
		if (rl <= cap)
			memcpy(out, rep, rl);
		*out_n = rl;
		xtc_free(rep);
	} else if (rep != NULL || rl != 0) {
		rc = -2000; // a failed call must not hand out a reply
	}
	xtc_osproc_signal(p, 9);
	xtc_osproc_wait(p, &st, -1);
	xtc_osproc_destroy(p);
	return rc;
}

typedef struct cfuzz_mb {
	const void *b;
	size_t n;
	int got_rc, same, corr_rc, corr_n, corr_same;
	cfuzz_dec dec;
} cfuzz_mb;

static void cfuzz_rx(void *arg)
{
	cfuzz_mb *m = arg;
	void *msg = NULL;
	size_t sz = 0;
	xtc_msg_t cm;
	int cn = 0;
	size_t k = m->n < 4 ? m->n : 4;

	// the same bytes, sent twice by ourselves: once taken by recv, once
	// by correlation on its first k bytes
	if (xtc_send(xtc_self(), m->b, m->n) != 0 ||
	    xtc_send(xtc_self(), m->b, m->n) != 0) {
		m->got_rc = -3000;
		return;
	}
	m->got_rc = xtc_recv(&msg, &sz, 1000000000LL);
	if (m->got_rc == 0) {
		m->same = sz == m->n && (m->n == 0 || memcmp(msg, m->b, m->n) == 0);
		cfuzz_decode(msg, sz, &m->dec);
		xtc_free(msg);
	}
	if (k == 0) {
		m->corr_rc = xtc_recv(&msg, &sz, 1000000000LL);
		if (m->corr_rc == 0)
			xtc_free(msg);
		m->corr_n = 1;
		m->corr_same = 1;
		return;
	}
	memset(&cm, 0, sizeof cm);
	m->corr_rc = xtc_recv_correlate(m->b, k, 1, &cm, &cn, 1000000000LL);
	m->corr_n = cn;
	if (m->corr_rc == 0 && cn == 1) {
		m->corr_same = cm.size == m->n &&
		               memcmp(cm.data, m->b, m->n) == 0;
		xtc_free(cm.data);
	}
}

static int cfuzz_mailbox(cfuzz_mb *m)
{
	xtc_loop_t *l = NULL;
	int rc = xtc_loop_init(&l);

	if (rc != 0)
		return rc;
	rc = xtc_proc_spawn(l, cfuzz_rx, m, NULL, NULL);
	if (rc == 0)
		rc = xtc_loop_run(l);
	xtc_loop_fini(l);
	return rc;
}
*/
import "C"

import (
	"unsafe"
)

// Dec is what the three runtime-message decoders said about one input.
type Dec struct {
	DownRC, DownExRC, ExitRC int
	Consistent               bool
}

func cbytes(b []byte) (unsafe.Pointer, func()) {
	if len(b) == 0 {
		return nil, func() {}
	}
	p := C.CBytes(b)
	return p, func() { C.free(p) }
}

// Decode runs xtc_down_decode, xtc_down_decode_ex and xtc_exit_decode on b.
func Decode(b []byte) Dec {
	p, free := cbytes(b)
	defer free()
	var d C.cfuzz_dec
	C.cfuzz_decode(p, C.size_t(len(b)), &d)
	return Dec{int(d.down_rc), int(d.down_ex_rc), int(d.exit_rc), d.consistent != 0}
}

// Serve feeds b to xtc_osproc_serve (an echo handler) and returns serve's
// code and every byte it wrote back.
func Serve(b []byte) (int, []byte) {
	p, free := cbytes(b)
	defer free()
	cap := 2*len(b) + 64
	out := C.malloc(C.size_t(cap))
	defer C.free(out)
	var n C.size_t
	rc := C.cfuzz_serve(p, C.size_t(len(b)), out, C.size_t(cap), &n)
	return int(rc), C.GoBytes(out, C.int(n))
}

// Call runs one xtc_osproc_call against a child whose whole reply stream
// is b; it returns the call's code and the reply.
func Call(b []byte, maxReply int) (int, []byte) {
	p, free := cbytes(b)
	defer free()
	cap := len(b) + 1
	out := C.malloc(C.size_t(cap))
	defer C.free(out)
	var n C.size_t
	rc := C.cfuzz_call(p, C.size_t(len(b)), C.size_t(maxReply), out, C.size_t(cap), &n)
	if int(n) > cap {
		return int(rc), nil
	}
	return int(rc), C.GoBytes(out, C.int(n))
}

// Mailbox is what a proc saw after sending b to itself twice and taking
// it back with xtc_recv and xtc_recv_correlate.
type Mailbox struct {
	RunRC, RecvRC, CorrRC, CorrN int
	Same, CorrSame               bool
	Dec                          Dec
}

// MailboxRoundTrip sends b to a proc's own mailbox and receives it back.
func MailboxRoundTrip(b []byte) Mailbox {
	p, free := cbytes(b)
	defer free()
	m := (*C.cfuzz_mb)(C.calloc(1, C.size_t(unsafe.Sizeof(C.cfuzz_mb{}))))
	defer C.free(unsafe.Pointer(m))
	m.b = p
	m.n = C.size_t(len(b))
	rc := C.cfuzz_mailbox(m)
	return Mailbox{
		RunRC: int(rc), RecvRC: int(m.got_rc), CorrRC: int(m.corr_rc),
		CorrN: int(m.corr_n), Same: m.same != 0, CorrSame: m.corr_same != 0,
		Dec: Dec{int(m.dec.down_rc), int(m.dec.down_ex_rc), int(m.dec.exit_rc), m.dec.consistent != 0},
	}
}
