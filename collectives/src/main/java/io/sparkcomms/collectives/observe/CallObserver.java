package io.sparkcomms.collectives.observe;

import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommAbortedException;
import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.CommTimeoutException;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.Work;
import io.sparkcomms.collectives.plan.PlannedCall;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * The observation of one communicator's calls: numbering, the hooks ({@link CallHook}) and the
 * flight recorder ({@link FlightRecorder}). The communicator calls {@link #begin} when a call starts,
 * in call order, and {@link Call#end} when it ends (on whichever thread sees it end).
 *
 * <p>When a call fails with {@link CommTimeoutException}, {@link CommMismatchException} (its
 * {@code CommCapacityException} included) or {@link CommAbortedException}, the flight record is
 * logged at WARNING and attached to the exception as a suppressed {@link FlightRecordDump}, before
 * the post hooks run. Cost per call without hooks: a sequence number, two records written under a
 * lock, two clock reads.
 */
public final class CallObserver {
  private static final System.Logger LOG = System.getLogger(CallObserver.class.getName());

  private final int rank;
  private final int size;
  private final Supplier<String> backend;
  private final FlightRecorder recorder;
  private final List<Registered> hooks = new CopyOnWriteArrayList<>();
  private final AtomicLong seq = new AtomicLong();

  /**
   * The observer of rank {@code rank} of {@code size}; {@code backend} names the backend (asked when
   * first needed, so a subclass constructor may pass its own method); the flight record holds the
   * last {@code recorderSize} calls.
   */
  public CallObserver(int rank, int size, Supplier<String> backend, int recorderSize) {
    this.rank = rank;
    this.size = size;
    this.backend = Objects.requireNonNull(backend, "backend");
    this.recorder = new FlightRecorder(recorderSize);
  }

  /** Adds {@code hook} after the others; the handle removes it. The same hook added twice runs twice. */
  public RemovableHandle addHook(CallHook hook) {
    Registered r = new Registered(Objects.requireNonNull(hook, "hook"));
    hooks.add(r);
    return () -> hooks.remove(r);
  }

  /** The last calls, oldest first (immutable). */
  public List<CallRecord> flightRecord() { return recorder.snapshot(); }

  /** The flight record as text, the call numbered {@code markSeq} marked ({@link FlightRecorder#dump}). */
  public String dump(long markSeq) { return recorder.dump(rank, size, backend.get(), markSeq); }

  /** Numbers and records the call {@code p} that starts now, and runs the pre hooks. */
  public Call begin(PlannedCall p, boolean async) {
    long s = seq.incrementAndGet();
    long count = p.kind() == Collective.ALL_TO_ALL_V && p.in() != null ? p.in().count() : p.count();
    CallInfo info = new CallInfo(rank, size, backend.get(), s, p.kind(), p.dtype(), count, p.messageBytes(), async);
    CallRecord started = new CallRecord(s, p.kind(), p.dtype(), count, p.messageBytes(), async, null,
        System.currentTimeMillis(), -1, CallRecord.State.IN_PROGRESS, null);
    int slot = recorder.add(started);
    if (!hooks.isEmpty()) each(h -> h.preCall(info), "preCall");
    return new Call(info, started, slot, System.nanoTime());
  }

  /** Whether a failure is one whose exception carries the flight record. */
  static boolean dumpsFor(Throwable t) {
    return t instanceof CommTimeoutException || t instanceof CommMismatchException || t instanceof CommAbortedException;
  }

  private void each(Consumer<CallHook> f, String which) {
    for (Registered r : hooks) {
      try {
        f.accept(r.hook);
      } catch (VirtualMachineError e) {
        throw e;
      } catch (Throwable t) {
        // the call and the peers must not depend on a hook: it is reported, not propagated
        if (r.warned.compareAndSet(false, true)) {
          LOG.log(System.Logger.Level.WARNING, "rank " + rank + ": call hook " + r.hook + " threw in " + which
              + "; ignored (logged once per hook)", t);
        }
      }
    }
  }

  /** One hook as added (a handle removes this registration, not an equal hook). */
  private static final class Registered {
    final CallHook hook;
    final AtomicBoolean warned = new AtomicBoolean();

    Registered(CallHook hook) { this.hook = hook; }
  }

  /** A started call; {@link #end} ends it once (later ends are ignored). */
  public final class Call {
    private final CallInfo info;
    private final CallRecord started;
    private final int slot;
    private final long t0;
    private final AtomicBoolean ended = new AtomicBoolean();

    private Call(CallInfo info, CallRecord started, int slot, long t0) {
      this.info = info;
      this.started = started;
      this.slot = slot;
      this.t0 = t0;
    }

    /** What the hooks saw before the call. */
    public CallInfo info() { return info; }

    /**
     * Ends the call: records {@code protocol} (null: unknown) and {@code failure} (null: success),
     * attaches and logs the flight record for the failures that carry it, then runs the post hooks.
     */
    public void end(Protocol protocol, Throwable failure) {
      if (!ended.compareAndSet(false, true)) return;
      long nanos = System.nanoTime() - t0;
      recorder.update(slot, started.finished(protocol, nanos, failure));
      if (failure != null && dumpsFor(failure) && recorder.capacity() > 0) attachDump(failure);
      if (!hooks.isEmpty()) {
        CallResult r = new CallResult(info, protocol, nanos, failure);
        each(h -> h.postCall(r), "postCall");
      }
    }

    private void attachDump(Throwable failure) {
      for (Throwable s : failure.getSuppressed()) if (s instanceof FlightRecordDump) return;
      String text = dump(info.seq());
      failure.addSuppressed(new FlightRecordDump(text));
      LOG.log(System.Logger.Level.WARNING, "rank " + rank + ": " + info.name() + " #" + info.seq() + " failed: "
          + CallRecord.describe(failure) + "\n" + text);
    }

    /**
     * {@code w} (an enqueued call's Work, running {@code protocol}) seen through: the call ends when
     * the Work is first seen complete, now or through the returned Work's methods.
     */
    public Work observe(Work w, Protocol protocol) {
      try {
        if (w.isCompleted()) end(protocol, null);
      } catch (RuntimeException e) {
        end(protocol, e);  // the Work raises it again to whoever asks
      }
      return new Work() {
        @Override public boolean isCompleted() {
          try {
            boolean d = w.isCompleted();
            if (d) end(protocol, null);
            return d;
          } catch (RuntimeException e) {
            end(protocol, e);
            throw e;
          }
        }

        @Override public void waitFor() {
          try {
            w.waitFor();
            end(protocol, null);
          } catch (RuntimeException e) {
            end(protocol, e);
            throw e;
          }
        }

        @Override public boolean waitFor(Duration timeout) {
          try {
            boolean d = w.waitFor(timeout);
            if (d) end(protocol, null);
            return d;
          } catch (RuntimeException e) {
            end(protocol, e);
            throw e;
          }
        }
      };
    }
  }
}
