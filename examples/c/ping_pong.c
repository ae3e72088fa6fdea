/*
 * ping_pong.c - procs and mailboxes: two procs bounce a message N times,
 * then the pinger shows selective receive, a receive timeout and the
 * mailbox statistics.
 *
 * Messages are copied into the receiver's bounded mailbox; xtc_recv hands
 * the receiver a buffer it frees with xtc_free.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xtc.h>

#define ROUNDS 100000

enum kind { PING, PONG, STOP, NOTE };

struct msg {
	enum kind kind;
	xtc_pid_t from;
	int seq;
};

static void
ponger(void *arg)
{
	struct msg *m;
	size_t len;
	long served = 0;

	(void)arg;
	while (xtc_recv((void **)&m, &len, -1) == XTC_OK) {
		enum kind k = m->kind;

		if (k == PING) {
			struct msg reply = {PONG, xtc_self(), m->seq};

			if (xtc_send(m->from, &reply, sizeof reply) != XTC_OK)
				printf("ponger: send failed\n");
			served++;
		}
		xtc_free(m);
		if (k == STOP)
			break;
	}
	printf("ponger: served %ld pings, exiting\n", served);
}

static int
is_note(const void *data, size_t size, void *user)
{
	(void)user;
	return size == sizeof(struct msg) &&
	    ((const struct msg *)data)->kind == NOTE;
}

static int failures;

static void
pinger(void *arg)
{
	xtc_loop_t *loop = arg;
	xtc_proc_opts_t opts = {.name = "ponger", .mailbox_cap = 64};
	xtc_pid_t me = xtc_self(), peer;
	xtc_mailbox_stats_t st;
	struct msg out = {PING, me, 0}, *in;
	size_t len;
	int64_t t0, dt;
	int i, rc;

	if (xtc_proc_spawn(loop, ponger, NULL, &opts, &peer) != XTC_OK) {
		failures++;
		return;
	}
	printf("pinger %u -> ponger %u: %d round trips\n", me.local_id,
	    peer.local_id, ROUNDS);

	t0 = xtc_clock_mono();
	for (i = 0; i < ROUNDS; i++) {
		out.seq = i;
		if (xtc_send(peer, &out, sizeof out) != XTC_OK ||
		    xtc_recv((void **)&in, &len, -1) != XTC_OK) {
			failures++;
			return;
		}
		if (in->kind != PONG || in->seq != i)
			failures++;
		xtc_free(in);
	}
	dt = xtc_clock_mono() - t0;
	printf("%d round trips in %.2f ms (%.0f ns each)\n", ROUNDS, dt / 1e6,
	    (double)dt / ROUNDS);

	/* Selective receive: queue a PONG then a NOTE to ourselves, take the
	 * NOTE first; the PONG stays queued in order. */
	struct msg note = {NOTE, me, 1}, pong = {PONG, me, 2};
	xtc_send(me, &pong, sizeof pong);
	xtc_send(me, &note, sizeof note);
	rc = xtc_recv_match(is_note, NULL, (void **)&in, &len, 0);
	printf("recv_match took kind %s (seq %d)\n",
	    rc == XTC_OK && in->kind == NOTE ? "NOTE" : "?",
	    rc == XTC_OK ? in->seq : -1);
	if (rc == XTC_OK)
		xtc_free(in);
	if (xtc_proc_mailbox_stats(me, &st) == XTC_OK)
		printf("my mailbox: depth %zu, saved %zu, cap %zu, "
		    "received %llu\n", st.depth, st.saved, st.cap,
		    (unsigned long long)st.recv_total);
	rc = xtc_recv((void **)&in, &len, 0);
	if (rc == XTC_OK) {
		printf("then recv took seq %d\n", in->seq);
		xtc_free(in);
	}

	/* A bounded wait on an empty mailbox times out with XTC_E_AGAIN. */
	t0 = xtc_clock_mono();
	rc = xtc_recv((void **)&in, &len, 5 * 1000 * 1000);
	printf("recv with a 5 ms timeout: %s after %.1f ms\n",
	    xtc_strerror(rc), (xtc_clock_mono() - t0) / 1e6);
	if (rc != XTC_E_AGAIN)
		failures++;

	out.kind = STOP;
	xtc_send(peer, &out, sizeof out);
}

int
main(void)
{
	xtc_loop_t *loop;

	if (xtc_loop_init(&loop) != XTC_OK)
		return 1;
	if (xtc_proc_spawn(loop, pinger, loop, NULL, NULL) != XTC_OK)
		return 1;
	if (xtc_loop_run(loop) != XTC_OK)
		return 1;
	xtc_loop_fini(loop);
	printf("%s\n", failures ? "FAILED" : "ok");
	return failures != 0;
}
