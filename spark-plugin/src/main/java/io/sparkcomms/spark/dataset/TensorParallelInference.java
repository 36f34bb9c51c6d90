package io.sparkcomms.spark.dataset;

import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
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
 * split across the ranks of a barrier stage (each rank keeps only its shard), every batch is shared
 * by the group, and partial outputs are combined with allReduce.
 *
 * <pre>{@code
 * Dataset<Row> scored = new TensorParallelInference(model)
 *     .featuresCol("features").outputCol("scores").batchSize(64)
 *     .transform(df);                                  // df's columns + scores: array<float>
 * }</pre>
 *
 * <p>Per step each rank takes {@code batchSize} of its own rows (zero-padded), allGathers them, so
 * the group works on ranks x batchSize rows, runs every layer on its shard, and keeps its own rows'
 * outputs. Splits ({@link Split}):
 * <ul>
 *   <li>{@code ROWS}: a rank holds a slice of the output rows of W; its slice of the activations is
 *       assembled into the full vector by a zero-padded allReduce SUM.</li>
 *   <li>{@code COLUMNS}: a rank holds a slice of the input columns of W and computes a partial
 *       product of the whole output, combined by allReduce SUM, then bias and activation.</li>
 *   <li>{@code ALTERNATING} (Megatron-style, default): ROWS, COLUMNS, ROWS, ...: a COLUMNS layer
 *       consumes the previous ROWS layer's slice directly, so two layers cost one allReduce.</li>
 * </ul>
 * Messages are {@code ranks * batchSize * width} floats: for small batches, the decode-size path the
 * flat one-shot algorithm is for. Output rows keep their partition and order. The model travels to
 * the executors as a Spark broadcast.
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
  private BarrierOptions barrier = BarrierOptions.defaults();

  /**
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

  public TensorParallelInference featuresCol(String c) { this.featuresCol = c; return this; }

  public TensorParallelInference outputCol(String c) { this.outputCol = c; return this; }

  /** Rows per rank per step. */
  public TensorParallelInference batchSize(int b) {
    if (b < 1) throw new IllegalArgumentException("batchSize must be >= 1, got " + b);
    this.batchSize = b;
    return this;
  }

  public TensorParallelInference split(Split s) { this.split = s; return this; }

  public TensorParallelInference barrierOptions(BarrierOptions o) { this.barrier = o; return this; }

  public TensorParallelInference comm(CommSettings s) { this.barrier = barrier.comm(s); return this; }

  /** {@code data} with {@code outputCol} ({@code array<float>}, the model's outputs) appended. */
  public Dataset<Row> transform(Dataset<Row> data) {
    StructType schema = data.schema();
    VectorAccumulator reader = VectorAccumulator.forColumn(schema, featuresCol);
    int fi = schema.fieldIndex(featuresCol);
    StructType outSchema = schema.add(outputCol, DataTypes.createArrayType(DataTypes.FloatType, false), false);
    Broadcast<List<DenseLayer>> bc = JavaSparkContext.fromSparkContext(data.sparkSession().sparkContext()).broadcast(layers);
    Split sp = split;
    int b = batchSize;
    JavaRDD<Row> out = BarrierDatasets.mapPartitions(data.javaRDD(),
        (comm, rows) -> run(comm, rows, bc.value(), sp, b, reader, fi), barrier);
    return data.sparkSession().createDataFrame(out, outSchema);
  }

  private static Iterator<Row> run(Communicator comm, Iterator<Row> it, List<DenseLayer> model, Split split, int b,
      VectorAccumulator reader, int fi) {
    List<Row> rows = new ArrayList<>();
    List<float[]> feats = new ArrayList<>();
    int in = model.get(0).in;
    while (it.hasNext()) {
      Row r = it.next();
      float[] x = reader.floats(r, fi);
      if (x == null || x.length != in) {
        throw new IllegalArgumentException("row " + rows.size() + " of partition " + comm.rank() + " has "
            + (x == null ? "no" : x.length) + " features, the model takes " + in);
      }
      rows.add(r);
      feats.add(x);
    }
    Sharded net = new Sharded(model, split, comm.rank(), comm.size());
    long[] max = {rows.size()};
    comm.allReduce(HostTensor.of(max), ReduceOp.MAX);
    int steps = (int) ((max[0] + b - 1) / b);
    int ranks = comm.size();
    int outW = model.get(model.size() - 1).out;
    float[] local = new float[b * in];
    float[] group = new float[ranks * b * in];
    List<Row> result = new ArrayList<>(rows.size());
    for (int step = 0; step < steps; step++) {
      int from = step * b;
      int valid = Math.max(0, Math.min(b, rows.size() - from));
      java.util.Arrays.fill(local, 0f);
      for (int k = 0; k < valid; k++) System.arraycopy(feats.get(from + k), 0, local, k * in, in);
      comm.allGather(HostTensor.of(local), HostTensor.of(group));
      float[] y = net.forward(comm, group, ranks * b);
      for (int k = 0; k < valid; k++) {
        float[] o = new float[outW];
        System.arraycopy(y, (comm.rank() * b + k) * outW, o, 0, outW);
        Row r = rows.get(from + k);
        Object[] vals = new Object[r.length() + 1];
        for (int c = 0; c < r.length(); c++) vals[c] = r.get(c);
        vals[r.length()] = o;
        result.add(RowFactory.create(vals));
      }
    }
    return result.iterator();
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
