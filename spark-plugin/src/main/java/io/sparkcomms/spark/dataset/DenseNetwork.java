package io.sparkcomms.spark.dataset;

import java.util.List;

/**
 * A feed-forward network of {@link DenseLayer}s: the model type {@link TensorParallelInference}
 * runs. A model class implements it by handing out its layers; a list of layers is one too
 * ({@code () -> layers}).
 */
@FunctionalInterface
public interface DenseNetwork {
  /** The layers, input layer first; each takes as many inputs as the previous one has outputs. */
  List<DenseLayer> layers();
}
