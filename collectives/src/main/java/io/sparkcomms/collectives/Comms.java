package io.sparkcomms.collectives;

import io.sparkcomms.collectives.host.HostCommunicator;
import io.sparkcomms.collectives.rendezvous.Rendezvous;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Entry point: creates a communicator over a {@link Rendezvous}. Collective: every rank calls it.
 *
 * <pre>{@code
 * try (Communicator comm = Comms.create(rendezvous, CommOptions.fromEnvironment())) {
 *   comm.allReduce(HostTensor.of(gradients), ReduceOp.AVG);
 * }
 * }</pre>
 */
public final class Comms {
  private Comms() {}

  /** Backend from {@code options.backend()}; AUTO is the host backend for host tensors. */
  public static Communicator create(Rendezvous rendezvous, CommOptions options) {
    if (options.backend() == CommOptions.Backend.GPU) {
      agree(rendezvous, options, "gpu");
      return GpuBackends.create(rendezvous, options, -1);
    }
    agree(rendezvous, options, "host");
    return HostCommunicator.create(rendezvous, options);
  }

  /**
   * A communicator for {@code device}: the GPU backend when it is available (AUTO or GPU), else the
   * host backend under AUTO. With backend GPU and no usable GPU library, the error says why.
   */
  public static Communicator create(Rendezvous rendezvous, CommOptions options, int device) {
    boolean gpu = options.backend() != CommOptions.Backend.HOST
        && (options.backend() == CommOptions.Backend.GPU || GpuBackends.available());
    agree(rendezvous, options, gpu ? "gpu" : "host");
    return gpu ? GpuBackends.create(rendezvous, options, device) : HostCommunicator.create(rendezvous, options);
  }

  /**
   * The communicator of ranks that may run on several nodes, host tensors: the ranks of each node
   * share a host shared-memory communicator, the nodes talk over {@code transport}
   * ({@link io.sparkcomms.collectives.hier.HierarchicalCommunicator}); ranks that all name one node get
   * the plain host backend. {@code node} names this rank's node (ranks of one node must share
   * /dev/shm). For the GPU backend, use {@link #createAcrossNodes(Rendezvous, String,
   * io.sparkcomms.collectives.net.Transport, CommOptions, int)}.
   */
  public static Communicator createAcrossNodes(Rendezvous rendezvous, String node, io.sparkcomms.collectives.net.Transport transport,
      CommOptions options) {
    if (options.backend() == CommOptions.Backend.GPU) {
      throw new IllegalArgumentException("the GPU backend across nodes needs a device ordinal: use "
          + "Comms.createAcrossNodes(rendezvous, node, transport, options, device)");
    }
    agree(rendezvous, options, "host+net");
    return io.sparkcomms.collectives.hier.HierarchicalComms.create(rendezvous, node, transport, options);
  }

  /**
   * As {@link #createAcrossNodes(Rendezvous, String, io.sparkcomms.collectives.net.Transport, CommOptions)},
   * for {@code device}: under AUTO or GPU with a usable GPU library, the GPU composition (each node's
   * ranks share a GPU communicator, NCCL / RCCL carries the cross-node leg:
   * {@link io.sparkcomms.collectives.hier.GpuHierarchicalCommunicator}); otherwise, under AUTO, the host
   * composition (also for a negative {@code device}). With backend GPU and no usable GPU library, the
   * error says why.
   */
  public static Communicator createAcrossNodes(Rendezvous rendezvous, String node, io.sparkcomms.collectives.net.Transport transport,
      CommOptions options, int device) {
    boolean forced = options.backend() == CommOptions.Backend.GPU;
    boolean gpu = forced || (options.backend() != CommOptions.Backend.HOST && GpuBackends.available() && device >= 0);
    if (!gpu) return createAcrossNodes(rendezvous, node, transport, options);
    if (!GpuBackends.available()) throw new CommException(io.sparkcomms.nativeapi.GpuLibrary.status().reason());
    if (device < 0) throw new IllegalArgumentException("the GPU backend needs a device ordinal");
    agree(rendezvous, options, "gpu+net");
    return io.sparkcomms.collectives.hier.HierarchicalComms.createGpu(rendezvous, node, transport, options, device);
  }

  /**
   * Every rank learns every rank's backend and {@link CommOptions#agreedSettings()}; all raise
   * {@link CommMismatchException} naming the differences when one rank differs from rank 0 (under AUTO
   * one executor with a GPU and one without would otherwise build different backends against each other).
   */
  static void agree(Rendezvous rv, CommOptions o, String backend) {
    List<String> mine = new ArrayList<>();
    mine.add("backend=" + backend);
    mine.addAll(o.agreedSettings());
    byte[][] all = rv.allGather(String.join("\n", mine).getBytes(StandardCharsets.UTF_8), o.timeout());
    List<String> ref = Arrays.asList(new String(all[0], StandardCharsets.UTF_8).split("\n", -1));
    StringBuilder diff = new StringBuilder();
    for (int p = 1; p < all.length; p++) {
      List<String> other = Arrays.asList(new String(all[p], StandardCharsets.UTF_8).split("\n", -1));
      for (int i = 0; i < Math.max(ref.size(), other.size()); i++) {
        String a = i < ref.size() ? ref.get(i) : "(none)", b = i < other.size() ? other.get(i) : "(none)";
        if (!a.equals(b)) diff.append(diff.length() == 0 ? "" : "; ").append("rank 0 ").append(a).append(", rank ").append(p).append(' ').append(b);
      }
    }
    if (diff.length() > 0) {
      throw new CommMismatchException("the ranks' communicator settings differ (they must agree; set them the same "
          + "way on every rank): " + diff);
    }
  }
}
