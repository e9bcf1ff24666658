// common/later.h - the send delay of a process: a delay line on which
// each message this process sends to another waits a fixed time before
// it goes out (`--send-delay`). It stands for a link's one-way delay
// where the kernel cannot add one (`pstrain run --link RATE,DELAY`
// without netem): every message is held for the same time, each from
// when it was handed over, so messages under way overlap as on a wire
// and keep their order. It applies to every message of the process, to
// a peer on the same emulated host too (netem's delay would not).
//
// One line per process, started by the server and worker programs
// (cli/proc/procs.c); off, pti_later runs the send at once. The client,
// the server and the ring hand their sends to it (client/client.c,
// ps/server.c, train/ring.c), and flush it before they close.
#ifndef PT_COMMON_LATER_H
#define PT_COMMON_LATER_H

// pti_later_fn sends what arg holds; it runs on the line's thread.
typedef void (*pti_later_fn)(void *arg);

// pti_later_start turns the line on with delay_s seconds (0: stays off).
// Returns 0, or PT_ENOMEM / PT_EIO when its thread cannot start.
int pti_later_start(double delay_s);

// pti_later_on tells whether the line is on.
int pti_later_on(void);

// pti_later runs fn(arg) delay_s seconds from now, after everything
// handed over before it; at once (in the caller) when the line is off.
void pti_later(pti_later_fn fn, void *arg);

// pti_later_flush runs whatever waits on the line now, and returns once
// it has: before a socket or a context it may send on closes.
void pti_later_flush(void);

// pti_later_stop flushes the line and ends its thread (the line is off
// after it); idempotent.
void pti_later_stop(void);

#endif // PT_COMMON_LATER_H
