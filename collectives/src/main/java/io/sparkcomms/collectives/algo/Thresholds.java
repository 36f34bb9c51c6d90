package io.sparkcomms.collectives.algo;

import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.lp.Fp8Format;

/**
 * The host backend's defaults: the value of every setting that {@link CommOptions} leaves unset
 * ({@link CommOptions#BACKEND_DEFAULT}, or null for the FP8 format) on the host shared-memory backend,
 * and the resolution "the option if set, else this default". The GPU backend's defaults live in the
 * native library's parameter table, not here.
 *
 * <p>Flat up to 256 KB, tree above (there is no vendor library on the host): with 2 ranks on a
 * 2-vCPU VM, flat took 120 us at 256 KB against tree's 321, tree 173 us at 1 MB against flat's 439;
 * smaller sizes are dominated by scheduling there, so the crossover is placed no more precisely
 * (docs/design.md, bench/results/2026-11-30-host-2core).
 */
public final class Thresholds {
  private Thresholds() {}

  /** Largest allReduce on the flat one-shot. */
  public static final long FLAT_MAX_BYTES = 256L << 10;
  /** Smallest message that uses FP8 under AUTO when low precision is enabled. */
  public static final long LP_MIN_BYTES = 16L << 20;
  /** Elements per FP8 scale. */
  public static final int LP_BLOCK_SIZE = 128;
  /**
   * Largest rank count whose LP allReduce is one-shot (one quantization per element), two-shot (the
   * reduced slice requantized) above. At 2 ranks the one-shot reads the same bytes as the two-shot.
   */
  public static final int LP_ONESHOT_MAX_RANKS = 2;
  /** Staging area per rank in the shared-memory segment. */
  public static final long STAGING_BYTES = 16L << 20;
  /** FP8 format on the wire (the host has no device to choose one). */
  public static final Fp8Format FP8_FORMAT = Fp8Format.E4M3FN;

  public static long flatMaxBytes(CommOptions o) { return set(o.flatMaxBytes()) ? o.flatMaxBytes() : FLAT_MAX_BYTES; }
  public static long lpMinBytes(CommOptions o) { return set(o.lpMinBytes()) ? o.lpMinBytes() : LP_MIN_BYTES; }
  public static int lpBlockSize(CommOptions o) { return set(o.lpBlockSize()) ? o.lpBlockSize() : LP_BLOCK_SIZE; }
  public static int lpOneShotMaxRanks(CommOptions o) { return set(o.lpOneShotMaxRanks()) ? o.lpOneShotMaxRanks() : LP_ONESHOT_MAX_RANKS; }
  public static long stagingBytes(CommOptions o) { return set(o.stagingBytes()) ? o.stagingBytes() : STAGING_BYTES; }
  public static Fp8Format fp8Format(CommOptions o) { return o.fp8Format() != null ? o.fp8Format() : FP8_FORMAT; }

  private static boolean set(long v) { return v != CommOptions.BACKEND_DEFAULT; }
}
