package io.sparkcomms.collectives.algo;

/**
 * Default allReduce thresholds per backend and rank count, from our measurements
 * (bench/RESULTS.md). Used when {@code CommOptions} leaves a threshold unset; an explicit option or
 * environment variable always wins.
 *
 * <ul>
 *   <li>GPU, 2 ranks (2x H200, NVLink): the flat one-shot beats tree and NCCL up to 4 MB (8 KB:
 *       3.3 us vs NCCL 7.0 us; 4 MB: 17.7 vs 32.7 us); tree up to 128 MB (16 MB: 56 vs 78 us);
 *       NCCL is faster from 256 MB (1 GB: 3.25 ms vs 3.59 ms). 4 and 8 ranks are not measured yet
 *       (no 4- or 8-GPU host was lent); their flat limits follow vLLM's published crossover
 *       (512 KB up to 4 ranks, 256 KB above), because flat traffic grows as O(n^2).</li>
 *   <li>Host shared memory: flat up to 256 KB, tree above (there is no vendor library).</li>
 * </ul>
 */
public final class Thresholds {
  private Thresholds() {}

  public static long flatMaxBytes(boolean gpu, int ranks) {
    if (!gpu) return 256L << 10;
    if (ranks <= 2) return 4L << 20;
    return ranks <= 4 ? 512L << 10 : 256L << 10;
  }

  public static long treeMaxBytes(boolean gpu, int ranks) {
    return gpu ? 128L << 20 : Long.MAX_VALUE;
  }
}
