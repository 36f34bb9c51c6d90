package org.rapaio.jupyter.kernel.channels;

import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * Replaces rapaio-jupyter-kernel 3.0.1's LoopThread (same name and API; run-notebooks.sh puts this
 * class ahead of the kernel jar on the kernel's class path). The shell, control and heartbeat
 * channels each run their polling loop in one of these threads. Two differences, each of which, in
 * the original, leaves the kernel bound to its ports but never answering (the start-up stall):
 * <ul>
 *   <li>{@code running} is set before {@link Thread#start()}. The original sets it after, so a
 *       thread scheduled before its starter writes the flag sees {@code false}, leaves its loop at
 *       once and ends silently (measured: the shell or control loop thread gone in 4 of 8 kernel
 *       starts on a loaded 2-core machine).</li>
 *   <li>An exception from one loop iteration is logged and the loop goes on. The original lets it
 *       end the thread: a kernel_info_request that arrives after the shell socket is bound but
 *       before the kernel has registered its message handlers throws a NullPointerException in
 *       Channels.getHandler. With the loop alive, that request is dropped and jupyter's client,
 *       which sends kernel_info_request again every second until one is answered, gets its reply.</li>
 * </ul>
 */
public final class LoopThread extends Thread {
  private static final Logger LOGGER = Logger.getLogger(LoopThread.class.getSimpleName());

  private volatile boolean running = false;
  private final long sleep;
  private final Runnable loopBody;

  public LoopThread(String name, long sleep, Runnable loopBody) {
    super(name);
    this.sleep = sleep;
    this.loopBody = loopBody;
  }

  @Override
  public void run() {
    while (running) {
      try {
        loopBody.run();
      } catch (RuntimeException e) {
        LOGGER.log(Level.SEVERE, getName() + ": loop iteration failed; the loop goes on", e);
      }
      try {
        Thread.sleep(sleep);
      } catch (InterruptedException e) {
        running = false;
        return;
      }
    }
  }

  @Override
  public synchronized void start() {
    running = true;
    super.start();
  }

  public void shutdown() {
    running = false;
  }
}
