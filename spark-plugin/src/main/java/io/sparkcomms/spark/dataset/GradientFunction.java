package io.sparkcomms.spark.dataset;

import java.io.Serializable;
import java.util.List;

/**
 * The model, for {@link DataParallelTrainer}: the loss of a batch of one partition's rows and its
 * gradient with respect to the parameters.
 *
 * @param <T> row type
 */
@FunctionalInterface
public interface GradientFunction<T> extends Serializable {
  /**
   * Writes the MEAN gradient over {@code batch} into {@code gradient} (zeroed on entry, as long as
   * {@code params}) and returns the MEAN loss over {@code batch}. Must not modify {@code params}.
   */
  double compute(float[] params, List<T> batch, float[] gradient);
}
