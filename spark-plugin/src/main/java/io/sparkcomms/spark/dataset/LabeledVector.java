package io.sparkcomms.spark.dataset;

import java.io.Serializable;
import java.util.Arrays;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.StructType;

/** A feature vector and its label: a row type for supervised models ({@link GradientFunction}). */
public final class LabeledVector implements Serializable {
  private static final long serialVersionUID = 1L;
  private final float[] features;
  private final float label;

  public LabeledVector(float[] features, float label) {
    this.features = features;
    this.label = label;
  }

  public float[] features() { return features; }

  public float label() { return label; }

  /**
   * The rows of {@code data} as labeled vectors: {@code featuresCol} an {@code array<float>},
   * {@code array<double>} or ML Vector column, {@code labelCol} numeric. Rows with a null feature
   * vector are dropped.
   */
  public static JavaRDD<LabeledVector> fromDataset(Dataset<Row> data, String featuresCol, String labelCol) {
    StructType schema = data.schema();
    VectorAccumulator reader = VectorAccumulator.forColumn(schema, featuresCol);
    int fi = schema.fieldIndex(featuresCol);
    int li = schema.fieldIndex(labelCol);
    return data.javaRDD().flatMap(row -> {
      float[] x = reader.floats(row, fi);
      if (x == null) return java.util.Collections.emptyIterator();
      return java.util.List.of(new LabeledVector(x, ((Number) row.get(li)).floatValue())).iterator();
    });
  }

  @Override public String toString() { return label + " " + Arrays.toString(features); }
}
