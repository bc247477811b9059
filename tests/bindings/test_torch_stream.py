#!/usr/bin/env python3
"""Suite 'bindings', test 'torch_stream': PyTorch's CUDA work and the library's, ordered by streams
and events alone (abi/tlrt_stream.h through bindings/python/torchlean_rt/), with no host
synchronisation between them. Exit 0 pass, 1 fail, 77 skip: skipped unless torch with CUDA is
importable and the library has a usable CUDA device (so everywhere without a GPU).

Every check is built to fail if the ordering were missing. PyTorch holds a stream busy with a long
kernel (torch.cuda._sleep, about LONG_S seconds); what must wait for it is queued behind it at
once, and looked at after SETTLE_S seconds, long before the kernel ends but long after an unordered
small op would have finished:
  1. torch producer, our consumer: our op queued on torch's current stream (the legacy default
     stream, reported as 0, and a torch.cuda.Stream) after torch's kernel is still pending (an
     event we record after it) while the kernel runs, and the library's own stream has nothing;
     after torch.cuda.synchronize() the event is complete and the result right.
  2. memory across the switch: our op reads buffer `a` on torch's stream behind torch's kernel, `a`
     is freed, and back on our own stream a buffer of the same size is filled with 7 at once,
     reusing a's block from the library's cache. Without the switch's event the fill would
     overwrite `a` before the op read it: the op's result tells.
  3. torch's event, our wait: torch records an event after its kernel on a stream of its own; our
     own stream waits for it (stream_wait_event); our op after that is still pending meanwhile.
  4. our work, torch's wait: torch's kernel is queued on our own stream (ExternalStream of
     stream_get), our op behind it; another torch stream waits for the library
     (stream_wait_for_library) and records an event, which stays pending while the kernel runs.
Run by meson with TORCHLEAN_RT_LIB (the built library) and PYTHONPATH (bindings/python); on a GPU
machine: meson test -C BUILD --suite bindings torch_stream --print-errorlogs.
"""
import gc
import os
import sys
import time

SKIP = 77
LONG_S = 1.0     # torch's busy kernel
SETTLE_S = 0.1   # how long an unordered op gets to finish before we look

if len(sys.argv) > 1 and os.path.isfile(os.path.join(sys.argv[1], "torchlean_rt", "__init__.py")):
    sys.path.insert(0, sys.argv[1])


def skip(why):
    print(f"torch_stream: skipped ({why})")
    sys.exit(SKIP)


if os.environ.get("TLRT_UNDER_VALGRIND"):
    skip("under valgrind")
try:
    import torch
except ImportError:
    skip("torch is not importable")
if not torch.cuda.is_available():
    skip("torch has no CUDA device")

import torchlean_rt as rt  # noqa: E402

if not rt.cuda_available():
    skip("the library has no usable CUDA device")

DEV = rt.cuda(0)
FAILURES = []


def check(cond, what):
    print(f"torch_stream: {'ok  ' if cond else 'FAIL'} {what}")
    if not cond:
        FAILURES.append(what)


def cycles_for(seconds):
    """torch.cuda._sleep cycles for about `seconds` on this GPU (its clock, measured once)."""
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    n = 10_000_000
    start.record()
    torch.cuda._sleep(n)
    end.record()
    end.synchronize()
    per_cycle_s = start.elapsed_time(end) / 1000.0 / n
    return int(seconds / max(per_cycle_s, 1e-12))


def torch_event(stream=None):
    """A torch event whose CUDA event exists (torch creates it at the first record). Waits for the
    stream: make these before a stream is held busy."""
    e = torch.cuda.Event()
    e.record(stream if stream is not None else torch.cuda.current_stream())
    e.synchronize()
    return e


_OWN_STREAM = []


def library_idle():
    """True when the library's own stream (the current one before any stream_set) has nothing
    pending."""
    if not _OWN_STREAM:
        _OWN_STREAM.append(rt.stream_get(DEV))
    return torch.cuda.ExternalStream(_OWN_STREAM[0]).query()


def producer_consumer(cycles, stream_ctx, label):
    x = rt.Buffer.from_list([float(i) for i in range(4096)], DEV)
    # With CUDA's lazy module loading (the default), the first launch of a kernel loads its module,
    # and that waits for the legacy default stream: launch the op once before torch's kernel.
    rt.mul(x, x)
    rt.synchronize(DEV)
    ours = torch_event()
    with stream_ctx:
        s = torch.cuda.current_stream()
        torch.cuda._sleep(cycles)               # torch's producer: busy for LONG_S
        with rt.use_stream(DEV, s):
            y = rt.mul(x, x)                    # our consumer, queued behind it on s
            rt.stream_record_event(DEV, ours)
            time.sleep(SETTLE_S)
            check(not ours.query(), f"{label}: our op waits for torch's kernel on the same stream")
            # (checked before switching back: the own stream then waits for s)
            check(library_idle(), f"{label}: nothing went to the library's own stream")
        torch.cuda.synchronize()
    check(ours.query(), f"{label}: our op done after torch.cuda.synchronize()")
    got = y.to_list()
    check(got == [float(i * i) for i in range(4096)], f"{label}: values")


def reuse_across_switch(cycles):
    n = 1 << 20
    a = rt.Buffer.full(n, 3.0, DEV)
    done = torch_event()                        # before torch's kernel: creating it synchronises
    rt.synchronize(DEV)
    s = torch.cuda.current_stream()
    torch.cuda._sleep(cycles)
    with rt.use_stream(DEV, s):
        b = rt.mul(a, a)                        # reads a, behind torch's kernel
    pooled_before = rt.stats(DEV)["pooled_bytes"]
    del a                                       # a's block goes to the library's cache
    gc.collect()
    pooled_freed = rt.stats(DEV)["pooled_bytes"]
    c = rt.Buffer.full(n, 7.0, DEV)             # our own stream: same size, a's block again
    pooled_after = rt.stats(DEV)["pooled_bytes"]
    check(pooled_freed >= pooled_before + 4 * n and pooled_after <= pooled_freed - 4 * n,
          "reuse: the fill took the freed block from the cache (precondition)")
    rt.stream_record_event(DEV, done)
    time.sleep(SETTLE_S)
    check(not done.query(), "reuse: our own stream waits for the torch stream it switched from")
    torch.cuda.synchronize()
    vb, vc = b.to_list(), c.to_list()
    check(vb[0] == 9.0 and vb[-1] == 9.0 and all(v == 9.0 for v in vb[::4099]),
          "reuse: the op read a before the fill overwrote its block (9, not 49)")
    check(vc[0] == 7.0 and vc[-1] == 7.0, "reuse: the fill")


def torch_event_then_library(cycles):
    x = rt.Buffer.full(1024, 2.0, DEV)
    ours = torch_event()
    rt.synchronize(DEV)
    t = torch.cuda.Stream()
    with torch.cuda.stream(t):
        torch.cuda._sleep(cycles)
    e = torch.cuda.Event()
    e.record(t)
    rt.stream_wait_event(DEV, e)
    y = rt.add(x, x)                            # our own stream, after torch's event
    rt.stream_record_event(DEV, ours)
    time.sleep(SETTLE_S)
    check(not ours.query(), "wait_event: our work waits for torch's event")
    torch.cuda.synchronize()
    check(ours.query() and y.to_list() == [4.0] * 1024, "wait_event: then runs, right values")


def library_then_torch(cycles):
    x = rt.Buffer.full(1024, 2.0, DEV)
    rt.synchronize(DEV)
    own = torch.cuda.ExternalStream(rt.stream_get(DEV))
    with torch.cuda.stream(own):
        torch.cuda._sleep(cycles)               # our own stream busy
    y = rt.add(x, x)                            # behind it
    t = torch.cuda.Stream()
    rt.stream_wait_for_library(DEV, t)          # t waits for the library's work so far
    theirs = torch.cuda.Event()
    theirs.record(t)
    time.sleep(SETTLE_S)
    check(not theirs.query(), "wait_for_library: torch's stream waits for the library")
    torch.cuda.synchronize()
    check(theirs.query() and y.to_list() == [4.0] * 1024, "wait_for_library: then runs")


def main():
    library_idle()  # remember the library's own stream before any test sets another
    print("torch_stream: torch", torch.__version__, "library", rt.LIB_PATH)
    cycles = cycles_for(LONG_S)
    own = rt.stream_get(DEV)
    producer_consumer(cycles, torch.cuda.stream(torch.cuda.default_stream()),
                      "legacy default stream")
    producer_consumer(cycles, torch.cuda.stream(torch.cuda.Stream()), "a torch stream")
    reuse_across_switch(cycles)
    torch_event_then_library(cycles)
    library_then_torch(cycles)
    check(rt.stream_get(DEV) == own, "the library's own stream is current again")
    print(f"torch_stream: {len(FAILURES)} failures")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
