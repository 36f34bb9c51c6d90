package io.sparkcomms.spark.dataset;

import java.io.Serializable;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.UserDefinedType;

/**
 * Reads vectors out of a column: {@code array<float>}, {@code array<double>}, an ML
 * ({@code org.apache.spark.ml.linalg.Vector}) or MLlib vector. Adds rows into a {@code double[]}
 * straight from Spark's internal rows (no boxing), or reads one external {@link Row}'s vector as floats.
 */
public final class VectorAccumulator implements Serializable {
  private static final long serialVersionUID = 1L;

  /** The column kinds. */
  public enum Kind { FLOAT_ARRAY, DOUBLE_ARRAY, ML_VECTOR, MLLIB_VECTOR }

  private final Kind kind;
  private final boolean containsNull;
  private final String column;

  private VectorAccumulator(Kind kind, boolean containsNull, String column) {
    this.kind = kind;
    this.containsNull = containsNull;
    this.column = column;
  }

  /** The accumulator for field {@code column} of {@code schema}; a clear error for other types. */
  public static VectorAccumulator forColumn(StructType schema, String column) {
    DataType t = schema.apply(column).dataType();
    if (t instanceof ArrayType at) {
      if (at.elementType() instanceof FloatType) return new VectorAccumulator(Kind.FLOAT_ARRAY, at.containsNull(), column);
      if (at.elementType() instanceof DoubleType) return new VectorAccumulator(Kind.DOUBLE_ARRAY, at.containsNull(), column);
    }
    if (t instanceof UserDefinedType<?> udt) {
      String cls = udt.userClass().getName();
      if (cls.equals("org.apache.spark.ml.linalg.Vector")) return new VectorAccumulator(Kind.ML_VECTOR, false, column);
      if (cls.equals("org.apache.spark.mllib.linalg.Vector")) return new VectorAccumulator(Kind.MLLIB_VECTOR, false, column);
    }
    throw new IllegalArgumentException("column '" + column + "' is " + t.simpleString()
        + "; expected array<float>, array<double> or an ML/MLlib Vector");
  }

  public Kind kind() { return kind; }

  /**
   * Adds field {@code i} of {@code row} into {@code acc[0]}, which is allocated on the first row with
   * one spare slot (length dim + 1). Returns the row's dimension, or -1 for a null value (skipped).
   *
   * @throws IllegalArgumentException on a dimension different from {@code acc[0]}'s, or a null element
   */
  public int add(InternalRow row, int i, double[][] acc) {
    if (row.isNullAt(i)) return -1;
    switch (kind) {
      case FLOAT_ARRAY: {
        ArrayData a = row.getArray(i);
        int n = a.numElements();
        double[] s = ensure(acc, n);
        if (containsNull) checkNoNull(a, n);
        for (int j = 0; j < n; j++) s[j] += a.getFloat(j);
        return n;
      }
      case DOUBLE_ARRAY: {
        ArrayData a = row.getArray(i);
        int n = a.numElements();
        double[] s = ensure(acc, n);
        if (containsNull) checkNoNull(a, n);
        for (int j = 0; j < n; j++) s[j] += a.getDouble(j);
        return n;
      }
      case ML_VECTOR: return MlVectors.addInternal(row, i, true, acc);
      default: return MlVectors.addInternal(row, i, false, acc);
    }
  }

  /** Field {@code i} of an external row as floats, or null when the value is null. */
  public float[] floats(Row row, int i) {
    if (row.isNullAt(i)) return null;
    Object v = row.get(i);
    if (kind == Kind.ML_VECTOR || kind == Kind.MLLIB_VECTOR) return MlVectors.toFloats(v);
    if (v instanceof float[] f) return f.clone();
    if (v instanceof double[] d) {
      float[] f = new float[d.length];
      for (int j = 0; j < d.length; j++) f[j] = (float) d[j];
      return f;
    }
    List<Object> list = row.getList(i);
    float[] f = new float[list.size()];
    for (int j = 0; j < f.length; j++) {
      Object x = list.get(j);
      if (x == null) throw new IllegalArgumentException("column '" + column + "' has a null element at index " + j);
      f[j] = ((Number) x).floatValue();
    }
    return f;
  }

  private void checkNoNull(ArrayData a, int n) {
    for (int j = 0; j < n; j++) {
      if (a.isNullAt(j)) throw new IllegalArgumentException("column '" + column + "' has a null element at index " + j);
    }
  }

  static double[] ensure(double[][] acc, int n) {
    double[] s = acc[0];
    if (s == null) {
      s = new double[n + 1];
      acc[0] = s;
    } else if (s.length != n + 1) {
      throw new IllegalArgumentException("vectors of different sizes in one column: " + (s.length - 1) + " and " + n);
    }
    return s;
  }
}
