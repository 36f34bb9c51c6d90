package io.sparkcomms.spark.dataset;

import org.apache.spark.sql.catalyst.InternalRow;

/**
 * ML / MLlib {@code Vector} access, kept in its own class so that spark-mllib is needed on the
 * classpath only when a vector column is actually used.
 */
final class MlVectors {
  private MlVectors() {}

  private static final org.apache.spark.ml.linalg.VectorUDT ML_UDT = new org.apache.spark.ml.linalg.VectorUDT();
  private static final org.apache.spark.mllib.linalg.VectorUDT MLLIB_UDT = new org.apache.spark.mllib.linalg.VectorUDT();

  static boolean isMl(Object v) { return v instanceof org.apache.spark.ml.linalg.Vector; }

  static boolean isMllib(Object v) { return v instanceof org.apache.spark.mllib.linalg.Vector; }

  /** Adds the vector stored (serialized) in {@code row}'s field {@code i} into {@code acc}; returns its size. */
  static int addInternal(InternalRow row, int i, boolean ml, double[][] acc) {
    InternalRow struct = row.getStruct(i, 4);
    Object v = ml ? ML_UDT.deserialize(struct) : MLLIB_UDT.deserialize(struct);
    return add(v, acc);
  }

  /** Adds an ml or mllib vector into {@code acc[0]} (allocated with one spare slot when null); returns its size. */
  static int add(Object vector, double[][] acc) {
    if (vector instanceof org.apache.spark.ml.linalg.Vector v) {
      return addParts(v.size(), v instanceof org.apache.spark.ml.linalg.SparseVector s ? s.indices() : null,
          v instanceof org.apache.spark.ml.linalg.SparseVector s2 ? s2.values() : v.toArray(), acc);
    }
    org.apache.spark.mllib.linalg.Vector v = (org.apache.spark.mllib.linalg.Vector) vector;
    return addParts(v.size(), v instanceof org.apache.spark.mllib.linalg.SparseVector s ? s.indices() : null,
        v instanceof org.apache.spark.mllib.linalg.SparseVector s2 ? s2.values() : v.toArray(), acc);
  }

  private static int addParts(int size, int[] indices, double[] values, double[][] acc) {
    double[] a = VectorAccumulator.ensure(acc, size);
    if (indices == null) {
      for (int j = 0; j < size; j++) a[j] += values[j];
    } else {
      for (int k = 0; k < indices.length; k++) a[indices[k]] += values[k];
    }
    return size;
  }

  /** The vector as floats. */
  static float[] toFloats(Object vector) {
    double[] d = vector instanceof org.apache.spark.ml.linalg.Vector v ? v.toArray()
        : ((org.apache.spark.mllib.linalg.Vector) vector).toArray();
    float[] f = new float[d.length];
    for (int j = 0; j < d.length; j++) f[j] = (float) d[j];
    return f;
  }
}
