package io.sparkcomms.spark;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeoutException;
import org.apache.spark.SparkContext;
import org.apache.spark.scheduler.AccumulableInfo;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.apache.spark.scheduler.SparkListenerTaskEnd;
import scala.jdk.javaapi.CollectionConverters;

/**
 * What the Spark UI's stage page gets of the {@link CommAccumulators}: the named accumulables of the
 * completed stages (their values) and of the successful tasks (their updates), from the listener
 * events the UI is built from. Register it before the job, call {@link #drain} after it.
 */
final class StageAccumulables extends SparkListener {
  /** Per completed stage: name to value, of the accumulables named {@link CommAccumulators#PREFIX}...; in completion order. */
  private final List<Map<String, Object>> stages = Collections.synchronizedList(new ArrayList<>());
  /** Per successful task: name to update. */
  private final List<Map<String, Object>> tasks = Collections.synchronizedList(new ArrayList<>());
  /** How many accumulables of each name the stages had (a name registered twice shows twice). */
  private final Map<String, Integer> perStageCounts = Collections.synchronizedMap(new LinkedHashMap<>());

  private final SparkContext sc;

  private StageAccumulables(SparkContext sc) { this.sc = sc; }

  static StageAccumulables listen(SparkContext sc) {
    StageAccumulables l = new StageAccumulables(sc);
    sc.addSparkListener(l);
    return l;
  }

  /** Waits for the events posted so far and stops listening. */
  StageAccumulables drain() throws TimeoutException {
    sc.listenerBus().waitUntilEmpty();
    sc.removeSparkListener(this);
    return this;
  }

  @Override public void onStageCompleted(SparkListenerStageCompleted e) {
    Map<String, Object> m = new LinkedHashMap<>();
    for (AccumulableInfo a : CollectionConverters.asJava(e.stageInfo().accumulables()).values()) {
      if (!ours(a)) continue;
      m.put(a.name().get(), a.value().get());
      perStageCounts.merge(e.stageInfo().stageId() + " " + a.name().get(), 1, Integer::sum);
    }
    if (!m.isEmpty()) stages.add(m);
  }

  @Override public void onTaskEnd(SparkListenerTaskEnd e) {
    if (!e.taskInfo().successful()) return;
    Map<String, Object> m = new LinkedHashMap<>();
    for (AccumulableInfo a : CollectionConverters.asJava(e.taskInfo().accumulables())) {
      if (ours(a) && a.update().isDefined()) m.put(a.name().get(), a.update().get());
    }
    tasks.add(m);
  }

  private static boolean ours(AccumulableInfo a) {
    return a.name().isDefined() && a.name().get().startsWith(CommAccumulators.PREFIX);
  }

  /** The completed stages that had any of our accumulables. */
  List<Map<String, Object>> stages() { return List.copyOf(stages); }

  /** The successful tasks' updates of our accumulables (an empty map for a task without any). */
  List<Map<String, Object>> tasks() { return List.copyOf(tasks); }

  /** "stageId name" to how many accumulables of that name the stage had. */
  Map<String, Integer> perStageCounts() { return Map.copyOf(perStageCounts); }

  /** The one stage with our accumulables; fails when there are none or several. */
  Map<String, Object> onlyStage() {
    List<Map<String, Object>> s = stages();
    if (s.size() != 1) throw new AssertionError("expected one stage with sparkcomms accumulators, got " + s);
    return s.get(0);
  }

  static long asLong(Map<String, Object> m, String name) {
    Object v = m.get(name);
    if (v == null) throw new AssertionError("no " + name + " in " + m);
    return ((Number) v).longValue();
  }

  static double asDouble(Map<String, Object> m, String name) {
    Object v = m.get(name);
    if (v == null) throw new AssertionError("no " + name + " in " + m);
    return ((Number) v).doubleValue();
  }
}
