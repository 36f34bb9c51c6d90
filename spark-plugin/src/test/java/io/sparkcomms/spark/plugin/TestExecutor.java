package io.sparkcomms.spark.plugin;

import java.util.Map;

/**
 * One executor talking to a driver plugin in this JVM, as {@link SparkCommsExecutorPlugin} does: its
 * messages sealed with the key from the driver's executor settings, its replies opened for it.
 */
final class TestExecutor {
  final SparkCommsDriverPlugin driver;
  /** The settings the driver plugin handed its executors. */
  final Map<String, String> settings;
  final PluginAuth.Sender sender;

  /** Executor {@code id} of {@code driver}, whose {@code start} returned {@code toExecutors}. */
  TestExecutor(SparkCommsDriverPlugin driver, Map<String, String> toExecutors, String id) {
    this.driver = driver;
    this.settings = toExecutors;
    this.sender = new PluginAuth.Sender(PluginAuth.decodeKey(toExecutors.get(PluginAuth.KEY_SETTING)), id);
  }

  /** A started driver plugin (default configuration) and its executor {@code id}. */
  static TestExecutor of(String id) {
    SparkCommsDriverPlugin d = new SparkCommsDriverPlugin();
    return new TestExecutor(d, d.start(Map.of()), id);
  }

  /** Another executor of the same driver. */
  TestExecutor peer(String id) { return new TestExecutor(driver, settings, id); }

  /** {@code message} sealed as this executor (the bytes an executor sends). */
  PluginAuth.Sealed seal(Object message) { return sender.seal(PluginWire.encodeRequest(message)); }

  /** Asks the driver, as {@code PluginWire.ask} does over Spark's RPC. */
  Object ask(Object message) {
    PluginAuth.Sealed s = seal(message);
    Object reply = driver.receive(s.wire());
    return reply == null ? null : PluginWire.decodeReply(sender.openReply(reply, s.counter()));
  }
}
