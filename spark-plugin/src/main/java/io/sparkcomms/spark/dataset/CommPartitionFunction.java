package io.sparkcomms.spark.dataset;

import io.sparkcomms.collectives.Communicator;
import java.io.Serializable;
import java.util.Iterator;

/**
 * A function over one partition of a barrier stage, with the stage's communicator: every partition
 * is one rank, and every rank must make the same collective calls in the same order.
 *
 * @param <T> input row type
 * @param <U> output row type
 */
@FunctionalInterface
public interface CommPartitionFunction<T, U> extends Serializable {
  Iterator<U> call(Communicator comm, Iterator<T> rows) throws Exception;
}
