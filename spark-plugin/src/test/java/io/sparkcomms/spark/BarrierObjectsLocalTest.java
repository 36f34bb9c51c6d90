package io.sparkcomms.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.esotericsoftware.kryo.Kryo;
import com.esotericsoftware.kryo.Serializer;
import com.esotericsoftware.kryo.io.Input;
import com.esotericsoftware.kryo.io.Output;
import java.util.List;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.serializer.KryoRegistrator;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * BarrierComms' object collectives in {@code local[2]} with Spark's Kryo settings: registration
 * required and a registrator ({@code spark.kryo.registrator}) whose serializer marks what it reads.
 */
class BarrierObjectsLocalTest {
  static JavaSparkContext sc;

  /** A task's contribution; {@code viaRegistrator} is set only by {@link ShardSerializer}. */
  public static final class Shard {
    final int partition;
    final String name;
    final boolean viaRegistrator;

    Shard(int partition, String name, boolean viaRegistrator) {
      this.partition = partition;
      this.name = name;
      this.viaRegistrator = viaRegistrator;
    }

    @Override public String toString() { return name + "@" + partition + (viaRegistrator ? "+registered" : ""); }
  }

  /** Not registered: with spark.kryo.registrationRequired=true, Spark's Kryo refuses it. */
  public static final class Unregistered {}

  static final class ShardSerializer extends Serializer<Shard> {
    @Override public void write(Kryo k, Output out, Shard s) {
      out.writeInt(s.partition);
      out.writeString(s.name);
    }

    @Override public Shard read(Kryo k, Input in, Class<Shard> type) { return new Shard(in.readInt(), in.readString(), true); }
  }

  /** Named by spark.kryo.registrator: Spark builds it by its public no-argument constructor. */
  public static final class Registrator implements KryoRegistrator {
    @Override public void registerClasses(Kryo kryo) { kryo.register(Shard.class, new ShardSerializer()); }
  }

  @BeforeAll static void start() {
    sc = new JavaSparkContext(new SparkConf()
        .setMaster("local[2]")
        .setAppName("sparkcomms-objects")
        .set("spark.plugins", SparkCommsPlugin.class.getName())
        .set("spark.ui.enabled", "false")
        .set("spark.sparkcomms.timeout", "20s")
        .set("spark.kryo.registrationRequired", "true")
        .set("spark.kryo.registrator", Registrator.class.getName()));
  }

  @AfterAll static void stop() {
    if (sc != null) sc.stop();
  }

  @Test @Timeout(60) void tasksGatherAndBroadcastRegisteredObjects() {
    List<String> out = BarrierJobs.collect(sc.parallelize(List.of(0, 1), 2), String.class, it -> {
      int p = it.next();
      List<Object> all = BarrierComms.allGatherObject(new Shard(p, "shard " + p, false));
      Object fromRoot = BarrierComms.broadcastObject(p == 1 ? new Shard(p, "root's", false) : null, 1);
      List<Object> onRoot = BarrierComms.gatherObject(new Shard(p, "g" + p, false), 0);
      return List.of(BarrierComms.get().rank() + " " + all + " " + fromRoot + " " + onRoot).iterator();
    });
    assertEquals(List.of(
        "0 [shard 0@0+registered, shard 1@1+registered] root's@1+registered [g0@0+registered, g1@1+registered]",
        "1 [shard 0@0+registered, shard 1@1+registered] root's@1 null"), out);
  }

  @Test @Timeout(60) void anUnregisteredClassOnOneTaskFailsTheStage() {
    Exception e = assertThrows(Exception.class, () -> BarrierJobs.collect(sc.parallelize(List.of(0, 1), 2), String.class, it -> {
      int p = it.next();
      List<Object> all = BarrierComms.allGatherObject(p == 1 ? new Unregistered() : new Shard(p, "fine", false));
      return List.of(String.valueOf(all)).iterator();
    }));
    String m = String.valueOf(e.getMessage());
    assertTrue(m.contains("CommObjectException: allGatherObject: rank 1 could not serialize its object ("
        + Unregistered.class.getName() + ")") && m.contains("not registered"), m);
  }
}
