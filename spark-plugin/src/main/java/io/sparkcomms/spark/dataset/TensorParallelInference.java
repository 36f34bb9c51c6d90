package io.sparkcomms.spark.dataset;

import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.math.DenseMath;
import io.sparkcomms.spark.BarrierComms;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * Tensor-parallel batch inference of a {@link DenseNetwork} over a Dataset: every layer's weights are
 * split across the ranks of a group of tasks of a barrier stage (each rank keeps only its shard),
 * every batch is shared by the group, and partial outputs are combined with allReduce.
 *
 * <pre>{@code
 * Dataset<Row> scored = new TensorParallelInference(model)
 *     .featuresCol("features").outputCol("scores").batchSize(64)
 *     .groupSize(2)                                    // optional: groups of 2 tasks, each with its own model copy
 *     .transform(df);                                  // df's columns + scores: array<float>
 * }</pre>
 *
 * <p>Groups: by default the whole stage is one group (the model is split over all N tasks). With
 * {@link #groupSize(int) groupSize(g)} the N tasks form N/g groups of g consecutive ranks (ranks
 * 0..g-1, g..2g-1, ...), made by {@code comm.split(rank / g, rank)}; each group holds the whole
 * model split g ways and processes the partitions of its members, independently of the other
 * groups (tensor parallelism inside a group, data parallelism across groups). The group
 * communicators are closed when their tasks end ({@link BarrierComms#closeWithTask}).
 *
 * <p>Per step each rank takes {@code batchSize} of its own rows (zero-padded), allGathers them in its
 * group, so the group works on g x batchSize rows, runs every layer on its shard, and keeps its own
 * rows' outputs. Splits ({@link Split}):
 * <ul>
 *   <li>{@code ROWS}: a rank holds a slice of the output rows of W; its slice of the activations is
 *       assembled into the full vector by a zero-padded allReduce SUM.</li>
 *   <li>{@code COLUMNS}: a rank holds a slice of the input columns of W and computes a partial
 *       product of the whole output, combined by allReduce SUM, then bias and activation.</li>
 *   <li>{@code ALTERNATING} (Megatron-style, default): ROWS, COLUMNS, ROWS, ...: a COLUMNS layer
 *       consumes the previous ROWS layer's slice directly, so two layers cost one allReduce; a last
 *       ROWS layer ends with an allGather of the slices. It runs on the communicator's dense math
 *       ({@link DenseShards}): with the GPU backend the weights, the step's rows and every
 *       activation stay in GPU memory (GEMMs in the vendor BLAS, partial outputs reduced on the
 *       device); a step's host transfers are its rows up and its outputs down.</li>
 * </ul>
 * ROWS and COLUMNS run on the host, their messages staged to the GPU backend when it is the one.
 * Messages are {@code g * batchSize * width} floats: for small batches, the decode-size path the
 * flat one-shot algorithm is for. Output rows keep their partition and order. The model travels to
 * the executors as a Spark broadcast.
 *
 * <p>Code that runs its own barrier stage, for example to use the stage's communicator between a
 * group's steps, calls {@link #infer(Communicator, List)} with its group communicator instead of
 * {@link #transform}.
 *
 * <p>The layers are taken from the network once, when this object is built; a later change of the
 * network's layers does not reach it.
 */
public final class TensorParallelInference implements Serializable {
  private static final long serialVersionUID = 1L;

  /** How the weights of each layer are split across the ranks. */
  public enum Split { ROWS, COLUMNS, ALTERNATING }

  private final List<DenseLayer> layers;
  private String featuresCol = "features";
  private String outputCol = "prediction";
  private int batchSize = 64;
  private Split split = Split.ALTERNATING;
  private int groupSize;                           // 0: the whole stage is one group
  private BarrierOptions barrier = BarrierOptions.defaults();
  /** {@link #infer}'s shards by (rank, ranks, split), built on first use in each JVM. */
  private transient Map<List<Object>, Sharded> inferShards;

  /**
   * An inference of {@code model}'s layers, as they are now.
   *
   * @throws IllegalArgumentException when the network has no layers or a layer's inputs differ from
   *     the previous layer's outputs
   */
  public TensorParallelInference(DenseNetwork model) {
    if (model == null) throw new IllegalArgumentException("model is null");
    List<DenseLayer> ls = List.copyOf(model.layers());
    if (ls.isEmpty()) throw new IllegalArgumentException("a model needs at least one layer");
    for (int i = 1; i < ls.size(); i++) {
      if (ls.get(i).in != ls.get(i - 1).out) {
        throw new IllegalArgumentException("layer " + i + " takes " + ls.get(i).in + " inputs, layer " + (i - 1)
            + " gives " + ls.get(i - 1).out);
      }
    }
    this.layers = ls;
  }

  /** The input column: {@code array<float>}, {@code array<double>} or an ML/MLlib vector ("features" by default). */
  public TensorParallelInference featuresCol(String c) { this.featuresCol = c; return this; }

  /** The column appended for the outputs, {@code array<float>} ("prediction" by default). */
  public TensorParallelInference outputCol(String c) { this.outputCol = c; return this; }

  /** Rows per rank per step. */
  public TensorParallelInference batchSize(int b) {
    if (b < 1) throw new IllegalArgumentException("batchSize must be >= 1, got " + b);
    this.batchSize = b;
    return this;
  }

  /** How each layer is split across the ranks of a group ({@link Split#ALTERNATING} by default). */
  public TensorParallelInference split(Split s) { this.split = s; return this; }

  /**
   * Tasks per tensor-parallel group: the stage's N tasks form N/g groups of g consecutive ranks, each
   * with its own copy of the model split g ways (see the class comment). N must be a multiple of
   * {@code g}: {@link #transform} refuses another count on the driver, and every task of a stage of
   * another size fails before its first collective. Not set: one group of all N tasks.
   *
   * @throws IllegalArgumentException when {@code g < 1}
   */
  public TensorParallelInference groupSize(int g) {
    if (g < 1) throw new IllegalArgumentException("groupSize must be >= 1, got " + g);
    this.groupSize = g;
    return this;
  }

  /** How the barrier stage runs: its number of tasks, retries, communicator options. */
  public TensorParallelInference barrierOptions(BarrierOptions o) { this.barrier = o; return this; }

  /** The communicator options of the barrier stage's tasks. */
  public TensorParallelInference comm(CommSettings s) { this.barrier = barrier.comm(s); return this; }

  /**
   * {@code data} with {@code outputCol} ({@code array<float>}, the model's outputs) appended.
   *
   * @throws IllegalArgumentException when {@link #groupSize(int)} does not divide the stage's number
   *     of tasks ({@link BarrierOptions#ranks()}, or the input's partitions when that is 0)
   */
  public Dataset<Row> transform(Dataset<Row> data) {
    StructType schema = data.schema();
    VectorAccumulator reader = VectorAccumulator.forColumn(schema, featuresCol);
    int fi = schema.fieldIndex(featuresCol);
    StructType outSchema = schema.add(outputCol, DataTypes.createArrayType(DataTypes.FloatType, false), false);
    JavaRDD<Row> in = data.javaRDD();
    int g = groupSize;
    if (g > 0) {
      String problem = groupProblem(g, BarrierDatasets.withRanks(in, barrier.ranks()).getNumPartitions());
      if (problem != null) throw new IllegalArgumentException(problem);
    }
    Broadcast<List<DenseLayer>> bc = JavaSparkContext.fromSparkContext(data.sparkSession().sparkContext()).broadcast(layers);
    Split sp = split;
    int b = batchSize;
    JavaRDD<Row> out = BarrierDatasets.mapPartitions(in,
        (comm, rows) -> run(comm, rows, bc.value(), sp, b, g, reader, fi), barrier);
    return data.sparkSession().createDataFrame(out, outSchema);
  }

  /**
   * Runs the model on this rank's rows, tensor-parallel over {@code group}, for code that runs its
   * own barrier stage: every rank of {@code group} calls it, as many times as its peers, each time
   * with its own rows (any number, none included), and gets the outputs of those rows, in order.
   * The model is split over the group's ranks as {@link #transform} splits it, and the batches of
   * {@link #batchSize(int)} rows per rank are shared by the group; ALTERNATING shards are built
   * (on a GPU: uploaded) on every call, the host shards of ROWS and COLUMNS on the first call for a
   * (group rank, group size, split) in this JVM and kept. Collective over {@code group}
   * only: the task's other communicators (the stage's, for one) may be used between calls.
   *
   * @param group this rank's group, for example a child of the stage's communicator
   *     ({@link BarrierComms#split(int[])})
   * @param features this rank's rows, each of the model's input width
   * @return one output array per row of {@code features}
   * @throws IllegalArgumentException on every rank of the group when a rank's row has another width
   *     (on that rank naming the row, on the others naming the rank), before any layer runs
   */
  public List<float[]> infer(Communicator group, List<float[]> features) {
    if (group == null) throw new IllegalArgumentException("group communicator is null");
    if (features == null) throw new IllegalArgumentException("features is null");
    int in = layers.get(0).in;
    String problem = null;
    for (int i = 0; i < features.size() && problem == null; i++) {
      float[] x = features.get(i);
      if (x == null || x.length != in) problem = "row " + i + " has " + (x == null ? "no" : x.length) + " features, the model takes " + in;
    }
    Sharded net = split == Split.ALTERNATING ? null : shardsFor(group.rank(), group.size());
    return forwardRows(group, layers, net, features, batchSize, problem);
  }

  private synchronized Sharded shardsFor(int rank, int ranks) {
    if (inferShards == null) inferShards = new HashMap<>();
    return inferShards.computeIfAbsent(List.of(rank, ranks, split), k -> new Sharded(layers, split, rank, ranks));
  }

  /** Why groups of {@code g} do not fit a stage of {@code n} tasks, or null when they do. */
  static String groupProblem(int g, int n) {
    if (n % g == 0) return null;
    return "TensorParallelInference: groupSize " + g + " does not divide the " + n + " tasks of the barrier stage; "
        + "use a groupSize that divides it, or BarrierOptions.ranks(n) with n a multiple of " + g;
  }

  /**
   * This rank's tensor-parallel group: {@code comm} itself when {@code g} is 0 or the stage's size,
   * else the child of ranks {@code g * (rank / g)} .. {@code g * (rank / g) + g - 1}, closed when the
   * task ends. Collective over {@code comm} when it splits; a size that {@code g} does not divide
   * fails on every rank before any collective. Package-private for tests.
   */
  static Communicator group(Communicator comm, int g) {
    if (g == 0 || g == comm.size()) return comm;
    String problem = groupProblem(g, comm.size());
    if (problem != null) throw new IllegalArgumentException(problem);
    return BarrierComms.closeWithTask(comm.split(comm.rank() / g, comm.rank()));
  }

  private static Iterator<Row> run(Communicator comm, Iterator<Row> it, List<DenseLayer> model, Split split, int b, int g,
      VectorAccumulator reader, int fi) {
    List<Row> rows = new ArrayList<>();
    List<float[]> feats = new ArrayList<>();
    int in = model.get(0).in;
    String problem = null;
    while (it.hasNext()) {
      Row r = it.next();
      float[] x = reader.floats(r, fi);
      if (problem == null && (x == null || x.length != in)) {
        problem = "row " + rows.size() + " of partition " + comm.rank() + " has " + (x == null ? "no" : x.length)
            + " features, the model takes " + in;
      }
      rows.add(r);
      feats.add(x);
    }
    Communicator group = group(comm, g);
    Sharded net = split == Split.ALTERNATING ? null : new Sharded(model, split, group.rank(), group.size());
    List<float[]> ys = forwardRows(group, model, net, feats, b, problem);
    List<Row> result = new ArrayList<>(rows.size());
    for (int k = 0; k < rows.size(); k++) {
      Row r = rows.get(k);
      Object[] vals = new Object[r.length() + 1];
      for (int c = 0; c < r.length(); c++) vals[c] = r.get(c);
      vals[r.length()] = ys.get(k);
      result.add(RowFactory.create(vals));
    }
    return result.iterator();
  }

  /**
   * The outputs of this rank's rows, over {@code group}: the group agrees on the number of steps
   * and on whether any rank's input is bad ({@code problem}, this rank's, or null) in one allReduce
   * MAX, so a bad row fails every rank of the group before any layer runs.
   */
  private static List<float[]> forwardRows(Communicator group, List<DenseLayer> layers, Sharded net, List<float[]> feats, int b,
      String problem) {
    long[] agree = {feats.size(), problem == null ? 0 : group.rank() + 1};
    group.allReduce(HostTensor.of(agree), ReduceOp.MAX);
    if (problem != null) throw new IllegalArgumentException(problem);
    if (agree[1] != 0) {
      throw new IllegalArgumentException("rank " + (agree[1] - 1) + " of this tensor-parallel group of " + group.size()
          + " has a row whose features do not fit the model (that rank's error says which)");
    }
    int steps = (int) ((agree[0] + b - 1) / b);
    int in = layers.get(0).in, outW = layers.get(layers.size() - 1).out;
    if (net != null) {
      float[] all = new float[group.size() * b * in];
      return runSteps(group, feats, b, steps, in, outW, local -> {
        group.allGather(HostTensor.of(local), HostTensor.of(all));
        return net.forward(group, all, group.size() * b);
      });
    }
    // ALTERNATING, on the group's dense math (DenseMath.forCommunicator): on a GPU communicator the
    // shards, the step's rows and every activation stay in GPU memory, reduced there; a step's host
    // transfers are its rows up and its outputs down. On the host its slices are ceil(width / ranks)
    // wide (zero-padded), so a column-split layer's partial sums are split elsewhere than Sharded's
    // and the outputs agree within float rounding.
    try (DenseMath math = DenseMath.forCommunicator(group)) {
      DenseShards shards = new DenseShards(math, layers, group.rank(), group.size(), b);
      return runSteps(group, feats, b, steps, in, outW, local -> shards.step(group, local));
    }
  }

  /**
   * {@code steps} steps of {@code b} of this rank's rows each (zero-padded), {@code step} mapping
   * them to the outputs of the group's rows of the step (rank q's from row {@code q * b}); returns
   * this rank's rows' outputs, in order.
   */
  private static List<float[]> runSteps(Communicator group, List<float[]> feats, int b, int steps, int in, int outW,
      java.util.function.UnaryOperator<float[]> step) {
    float[] local = new float[b * in];
    List<float[]> result = new ArrayList<>(feats.size());
    for (int s = 0; s < steps; s++) {
      int from = s * b;
      int valid = Math.max(0, Math.min(b, feats.size() - from));
      java.util.Arrays.fill(local, 0f);
      for (int k = 0; k < valid; k++) System.arraycopy(feats.get(from + k), 0, local, k * in, in);
      float[] y = step.apply(local);
      for (int k = 0; k < valid; k++) {
        float[] o = new float[outW];
        System.arraycopy(y, (group.rank() * b + k) * outW, o, 0, outW);
        result.add(o);
      }
    }
    return result;
  }

  /** One rank's shards of every layer and the split forward pass. Package-private for tests. */
  static final class Sharded {
    private final List<Shard> shards = new ArrayList<>();
    private final int rank;
    private final int ranks;

    Sharded(List<DenseLayer> ls, Split split, int rank, int ranks) {
      this.rank = rank;
      this.ranks = ranks;
      for (int i = 0; i < ls.size(); i++) {
        boolean rows = split == Split.ROWS || (split == Split.ALTERNATING && i % 2 == 0);
        shards.add(new Shard(ls.get(i), rows, rank, ranks));
      }
    }

    /** Activations of {@code g} rows: the full vectors, or a slice [lo, hi) of width {@code dim}. */
    private static final class Act {
      float[] v;
      int dim;
      int lo;
      int hi;
      boolean sliced;
    }

    float[] forward(Communicator comm, float[] x, int g) {
      Act a = new Act();
      a.v = x;
      a.dim = shards.get(0).layer.in;
      a.lo = 0;
      a.hi = a.dim;
      for (Shard s : shards) {
        if (s.rows) {
          if (a.sliced) assemble(comm, a, g);
          int w = s.hi - s.lo;
          int in = s.layer.in;
          float[] y = new float[g * w];
          for (int r = 0; r < g; r++) {
            int xb = r * in;
            for (int k = 0; k < w; k++) {
              y[r * w + k] = s.layer.activation.apply(dot(s.w, k * in, a.v, xb, in) + s.b[k]);
            }
          }
          a.v = y;
          a.dim = s.layer.out;
          a.lo = s.lo;
          a.hi = s.hi;
          a.sliced = true;
        } else {
          int w = s.hi - s.lo;
          float[] xs;
          if (a.sliced && a.lo == s.lo && a.hi == s.hi) {
            xs = a.v;
          } else {
            if (a.sliced) assemble(comm, a, g);
            xs = new float[g * w];
            for (int r = 0; r < g; r++) System.arraycopy(a.v, r * a.dim + s.lo, xs, r * w, w);
          }
          int out = s.layer.out;
          float[] p = new float[g * out];
          for (int r = 0; r < g; r++) {
            int xb = r * w;
            for (int o = 0; o < out; o++) p[r * out + o] = dot(s.w, o * w, xs, xb, w);
          }
          comm.allReduce(HostTensor.of(p), ReduceOp.SUM);
          for (int r = 0; r < g; r++) {
            for (int o = 0; o < out; o++) p[r * out + o] = s.layer.activation.apply(p[r * out + o] + s.b[o]);
          }
          a.v = p;
          a.dim = out;
          a.lo = 0;
          a.hi = out;
          a.sliced = false;
        }
      }
      if (a.sliced) assemble(comm, a, g);
      return a.v;
    }

    /** Sum of {@code w[wo + i] * x[xo + i]}, {@code i < n}, in order, in float32 (the order of a plain dense layer's loop). */
    static float dot(float[] w, int wo, float[] x, int xo, int n) {
      float sum = 0;
      for (int i = 0; i < n; i++) sum += w[wo + i] * x[xo + i];
      return sum;
    }

    /** Zero-padded allReduce SUM: every rank contributes its slice, all get the full vectors. */
    private static void assemble(Communicator comm, Act a, int g) {
      int w = a.hi - a.lo;
      float[] full = new float[g * a.dim];
      for (int r = 0; r < g; r++) System.arraycopy(a.v, r * w, full, r * a.dim + a.lo, w);
      comm.allReduce(HostTensor.of(full), ReduceOp.SUM);
      a.v = full;
      a.lo = 0;
      a.hi = a.dim;
      a.sliced = false;
    }

    long shardParameters() {
      long n = 0;
      for (Shard s : shards) n += s.w.length + s.b.length;
      return n;
    }
  }

  /** One rank's slice of one layer. */
  private static final class Shard {
    final DenseLayer layer;
    final boolean rows;
    final int lo;
    final int hi;
    final float[] w;   // rows: [hi-lo][in]; columns: [out][hi-lo]
    final float[] b;   // rows: bias slice; columns: full bias

    Shard(DenseLayer l, boolean rows, int rank, int ranks) {
      this.layer = l;
      this.rows = rows;
      int d = rows ? l.out : l.in;
      this.lo = (int) ((long) d * rank / ranks);
      this.hi = (int) ((long) d * (rank + 1) / ranks);
      int w = hi - lo;
      if (rows) {
        this.w = java.util.Arrays.copyOfRange(l.weights, lo * l.in, hi * l.in);
        this.b = java.util.Arrays.copyOfRange(l.bias, lo, hi);
      } else {
        this.w = new float[l.out * w];
        for (int o = 0; o < l.out; o++) System.arraycopy(l.weights, o * l.in + lo, this.w, o * w, w);
        this.b = l.bias.clone();
      }
    }
  }
}
