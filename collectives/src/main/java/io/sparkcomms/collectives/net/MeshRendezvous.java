package io.sparkcomms.collectives.net;

import io.sparkcomms.collectives.rendezvous.Rendezvous;
import io.sparkcomms.collectives.rendezvous.RendezvousException;
import java.nio.ByteBuffer;
import java.time.Duration;

/**
 * A {@link Rendezvous} among some ranks of a {@link Mesh} (the ranks of one node, to build their
 * shared-memory communicator): each round sends this rank's blob to every other member on
 * {@link Mesh#RENDEZVOUS} and takes theirs. Members must be disjoint from every other group that
 * uses this channel of the mesh.
 */
public final class MeshRendezvous implements Rendezvous {
  /** Longest blob a member may send in one round. */
  public static final int MAX_BLOB_BYTES = 64 * 1024;
  private final Mesh mesh;
  private final int[] members;
  private final int me;
  private long round;

  /** {@code members}: world ranks in rendezvous-rank order; this mesh's rank must be one of them. */
  public MeshRendezvous(Mesh mesh, int[] members) {
    this.mesh = mesh;
    this.members = members.clone();
    int found = -1;
    for (int i = 0; i < members.length; i++) if (members[i] == mesh.rank()) found = i;
    if (found < 0) throw new IllegalArgumentException("rank " + mesh.rank() + " is not a member");
    this.me = found;
  }

  @Override public int rank() { return me; }

  @Override public int size() { return members.length; }

  @Override public byte[][] allGather(byte[] mine, Duration timeout) {
    if (mine.length > MAX_BLOB_BYTES) throw new RendezvousException(describe() + ": a blob of " + mine.length + " bytes (at most " + MAX_BLOB_BYTES + ")");
    long seq = round++;
    long deadline = System.nanoTime() + timeout.toNanos();
    try {
      for (int i = 0; i < members.length; i++) if (i != me) mesh.send(members[i], Mesh.RENDEZVOUS, seq, ByteBuffer.wrap(mine));
      byte[][] all = new byte[members.length][];
      all[me] = mine.clone();
      for (int i = 0; i < members.length; i++) {
        if (i == me) continue;
        ByteBuffer b = mesh.take(members[i], Mesh.RENDEZVOUS, seq, deadline);
        if (b.remaining() > MAX_BLOB_BYTES) throw new RendezvousException(describe() + ": rank " + members[i] + " sent a blob of " + b.remaining() + " bytes");
        all[i] = new byte[b.remaining()];
        b.get(all[i]);
      }
      return all;
    } catch (RendezvousException e) {
      throw e;
    } catch (RuntimeException e) {
      throw new RendezvousException(describe() + ": " + e.getMessage(), e);
    }
  }

  @Override public String describe() {
    return "node rendezvous of world ranks " + java.util.Arrays.toString(members) + " (member " + me + ")";
  }
}
