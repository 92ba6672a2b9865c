/* SPDX-License-Identifier: MIT */
/*
 * streamgen.c - a stream generator for measuring the collector alone. Run
 * as the command of `sqlprof record`, it connects to $SQLPROF_SOCK as the
 * preload does and sends, in the real format (preload/sp_wire.h, version
 * 3): HELLO, one SQL record and one STACK record (20 frames) per distinct
 * text, N EXEC records in messages of 128 KiB of records (the preload's
 * ring size, so messages are as big as the preload's largest), and a
 * final message with BYE. Sends block, so the generator goes exactly as
 * fast as the collector takes messages.
 *
 * Since version 3 a process's totals live in its shared statistics and
 * the stream carries only events: each EXEC record here is a *sampled*
 * execution (SP_EXEC_SAMPLED | SP_EXEC_RANDOM, with its query's stack), the
 * collector's real per-record work (a site update, and the event kept
 * for timelines up to record --max-events). The generator shares no
 * statistics, so the profile's totals are empty: BYE says 0 executions
 * counted. It sends no MODULE records, so the stacks symbolize as "??".
 *
 * It exports sqlprof_is_collector, which keeps the libsqlprof.so that
 * `sqlprof record` preloads into it inert: the only stream is ours.
 *
 * Prints the BENCH line (bench.h) with loop_ns the time to send all the
 * EXEC messages, and cpu_ns its own CPU time, so the collector's
 * share can be told apart.
 *
 * Usage: streamgen [N [QUERIES]]   (default 10000000 events of 4 texts)
 */
#include <errno.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "bench.h"
#include "sp_wire.h"

__attribute__((visibility("default"))) const int sqlprof_is_collector = 1;

#define PAYLOAD (128u * 1024u)
#define NBUF 8
#define DEPTH 20 /* frames per stack, as bench/deep's */

static int fd;
static uint64_t seq;

/* Send one message: header + body; exits on failure. */
static void send_msg(uint8_t *msg, size_t body_len, uint16_t flags)
{
	struct sp_msg_hdr mh = {
		.magic = SP_WIRE_MAGIC,
		.version = SP_WIRE_VERSION,
		.flags = flags,
		.pid = (uint32_t)getpid(),
		.len = (uint32_t)(sizeof(mh) + body_len),
		.seq = ++seq,
	};

	memcpy(msg, &mh, sizeof(mh));
	for (;;) {
		ssize_t n = send(fd, msg, mh.len, MSG_NOSIGNAL);

		if (n == (ssize_t)mh.len)
			return;
		if (n < 0 && errno == EINTR)
			continue;
		fprintf(stderr, "streamgen: send: %s\n", n < 0 ? strerror(errno) : "short");
		exit(1);
	}
}

static uint64_t sql_id(long q)
{
	return 0x5157000000000001ull + (uint64_t)q * 0x9e3779b97f4a7c15ull;
}

static uint64_t stack_id(long q)
{
	return 0x5354000000000001ull + (uint64_t)q * 0xc2b2ae3d27d4eb4full;
}

int main(int argc, char **argv)
{
	long n = bench_arg(argc, argv, 1, 10000000), nq = bench_arg(argc, argv, 2, 4), i, b;
	const char *sock = getenv(SP_ENV_SOCK);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	uint32_t pid = (uint32_t)getpid();
	static uint8_t buf[NBUF][sizeof(struct sp_msg_hdr) + PAYLOAD], misc[4096];
	const size_t per = PAYLOAD / sizeof(struct sp_rec_exec);
	uint64_t t0, t1, start0;
	size_t off;
	struct rusage ru;

	if (!sock || strlen(sock) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "streamgen: run me under sqlprof record (no usable %s)\n",
			SP_ENV_SOCK);
		return 2;
	}
	strcpy(sa.sun_path, sock);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("streamgen: connect");
		return 1;
	}

	/* HELLO, the SQL texts and their stacks. */
	{
		static const char exe[] = "streamgen";
		struct sp_rec_hello h = {
			.h = { SP_REC_HELLO, 0, SP_ALIGN8(sizeof(h) + sizeof(exe)) },
			.pid = pid,
			.tid = pid,
			.ppid = (uint32_t)getppid(),
			.clock = SP_CLOCK_MONOTONIC,
			.start_mono_ns = bench_now_ns(),
			.exe_len = sizeof(exe) - 1,
		};

		off = sizeof(struct sp_msg_hdr);
		memset(misc, 0, sizeof(misc));
		memcpy(misc + off, &h, sizeof(h));
		memcpy(misc + off + sizeof(h), exe, sizeof(exe) - 1);
		off += h.h.len;
		for (i = 0; i < nq; i++) {
			char text[64];
			int tl = snprintf(text, sizeof(text), "SELECT v FROM t%ld WHERE k = ?", i);
			struct sp_rec_sql s = {
				.h = { SP_REC_SQL, 0, SP_ALIGN8(sizeof(s) + (uint32_t)tl) },
				.pid = pid,
				.tid = pid,
				.sql_id = sql_id(i),
				.full_len = (uint32_t)tl,
				.text_len = (uint32_t)tl,
			};

			struct sp_rec_stack st = {
				.h = { SP_REC_STACK, 0, sizeof(st) + DEPTH * sizeof(uint64_t) },
				.pid = pid,
				.tid = pid,
				.stack_id = stack_id(i),
				.depth = DEPTH,
			};
			int f;

			if (off + s.h.len + st.h.len > sizeof(misc)) {
				send_msg(misc, off - sizeof(struct sp_msg_hdr), 0);
				off = sizeof(struct sp_msg_hdr);
				memset(misc, 0, sizeof(misc));
			}
			memcpy(misc + off, &s, sizeof(s));
			memcpy(misc + off + sizeof(s), text, (size_t)tl);
			off += s.h.len;
			memcpy(misc + off, &st, sizeof(st));
			for (f = 0; f < DEPTH; f++) {
				uint64_t pc =
					0x401000u + (uint64_t)i * 0x1000u + (uint64_t)f * 0x40u;

				memcpy(misc + off + sizeof(st) + (size_t)f * sizeof(pc), &pc,
				       sizeof(pc));
			}
			off += st.h.len;
		}
		send_msg(misc, off - sizeof(struct sp_msg_hdr), 0);
	}

	/* NBUF message bodies with varied times, sent in turn (the events'
	 * sequence numbers and start times repeat every NBUF messages: the
	 * collector does not order events). */
	start0 = bench_now_ns();
	for (b = 0; b < NBUF; b++) {
		for (i = 0; i < (long)per; i++) {
			long k = b * (long)per + i;
			struct sp_rec_exec r = {
				.h = { SP_REC_EXEC, SP_EXEC_SAMPLED | SP_EXEC_RANDOM, sizeof(r) },
				.pid = pid,
				.tid = pid,
				.sql_id = sql_id(k % nq),
				.seq = (uint64_t)k + 1,
				.db = 1,
				.db_time = 500 + (uint64_t)(k * 7919 % 100000),
				.rows = 1,
				.stack_id = stack_id(k % nq),
				.vm_steps = 12,
				.kind = SP_KIND_STMT,
			};
			r.wall = r.db_time + 100;
			r.start = start0 + (uint64_t)k * 1000;
			memcpy(buf[b] + sizeof(struct sp_msg_hdr) + (size_t)i * sizeof(r), &r,
			       sizeof(r));
		}
	}
	t0 = bench_now_ns();
	for (i = 0, b = 0; i < n; b = (b + 1) % NBUF) {
		long k = n - i < (long)per ? n - i : (long)per;

		send_msg(buf[b], (size_t)k * sizeof(struct sp_rec_exec), 0);
		i += k;
	}
	t1 = bench_now_ns();

	{
		struct sp_rec_bye bye = {
			.h = { SP_REC_BYE, 0, sizeof(bye) },
			.pid = pid,
			.tid = pid,
			.executions = 0,
			.status = 0,
		};

		memcpy(misc + sizeof(struct sp_msg_hdr), &bye, sizeof(bye));
		send_msg(misc, sizeof(bye), SP_MSG_FINAL);
	}
	close(fd);
	getrusage(RUSAGE_SELF, &ru);
	printf("BENCH name=streamgen n=%ld loop_ns=%llu maxrss_kb=%ld cpu_ns=%lld check=%ld\n", n,
	       (unsigned long long)(t1 - t0), bench_maxrss_kb(),
	       ((long long)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ll +
		       ((long long)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ll,
	       (long)seq);
	return 0;
}
