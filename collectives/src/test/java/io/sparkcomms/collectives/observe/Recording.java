package io.sparkcomms.collectives.observe;

import java.util.ArrayList;
import java.util.List;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

/** Test hooks and a log capture for the observe tests. */
final class Recording {
  private Recording() {}

  /** One callback a hook saw: the pre info or the post result, and the thread it ran on. */
  record Event(boolean pre, CallInfo info, CallResult result, String thread) {}

  /** A hook that records every callback. */
  static final class Hook implements CallHook {
    final List<Event> events = new ArrayList<>();

    @Override public synchronized void preCall(CallInfo call) {
      events.add(new Event(true, call, null, Thread.currentThread().getName()));
    }

    @Override public synchronized void postCall(CallResult result) {
      events.add(new Event(false, result.call(), result, Thread.currentThread().getName()));
    }

    synchronized List<Event> events() { return List.copyOf(events); }

    synchronized List<CallResult> posts() {
      List<CallResult> out = new ArrayList<>();
      for (Event e : events) if (!e.pre()) out.add(e.result());
      return out;
    }
  }

  /** The WARNING-or-above records logged by one class's System.Logger (the JUL backend) while open. */
  static final class Warnings implements AutoCloseable {
    private final Logger logger;  // held: JUL keeps loggers weakly
    private final List<String> messages = new ArrayList<>();
    private final Handler handler = new Handler() {
      @Override public void publish(LogRecord r) {
        if (r.getLevel().intValue() >= Level.WARNING.intValue()) {
          synchronized (messages) {
            messages.add(r.getMessage());
          }
        }
      }
      @Override public void flush() {}
      @Override public void close() {}
    };

    Warnings(Class<?> source) {
      logger = Logger.getLogger(source.getName());
      logger.addHandler(handler);
    }

    List<String> containing(String text) {
      synchronized (messages) {
        return messages.stream().filter(m -> m != null && m.contains(text)).toList();
      }
    }

    @Override public void close() { logger.removeHandler(handler); }
  }
}
