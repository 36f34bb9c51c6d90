package io.sparkcomms.spark.net;

import io.sparkcomms.collectives.net.Transport;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.List;
import org.apache.spark.SecurityManager;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.network.TransportContext;
import org.apache.spark.network.client.RpcResponseCallback;
import org.apache.spark.network.client.TransportClient;
import org.apache.spark.network.client.TransportClientBootstrap;
import org.apache.spark.network.client.TransportClientFactory;
import org.apache.spark.network.crypto.AuthClientBootstrap;
import org.apache.spark.network.crypto.AuthServerBootstrap;
import org.apache.spark.network.server.OneForOneStreamManager;
import org.apache.spark.network.server.RpcHandler;
import org.apache.spark.network.server.StreamManager;
import org.apache.spark.network.server.TransportServer;
import org.apache.spark.network.server.TransportServerBootstrap;
import org.apache.spark.network.util.MapConfigProvider;
import org.apache.spark.network.util.TransportConf;

/**
 * The cross-node leg of a communicator over Spark's own network library (what shuffle uses): one
 * server per executor, one-way messages on one pooled connection per peer (so messages to a peer keep
 * their order). With {@code spark.authenticate} every connection is authenticated with the
 * application's secret (and encrypted with {@code spark.network.crypto.enabled}), exactly as Spark's
 * block transfers are; without it any process that reaches the port can connect, and only the
 * frame checks of {@link io.sparkcomms.collectives.net.Mesh} stand between it and the data (see
 * docs/security.md). Connection settings are Spark's module keys {@code spark.sparkcommsnet.io.*} (two server and two
 * client threads unless set).
 */
public final class SparkNetworkTransport extends Transport {
  /** Spark's transport-module name: its settings are {@code spark.sparkcommsnet.io.*}. */
  static final String MODULE = "sparkcommsnet";
  private static SparkNetworkTransport current;

  private final TransportContext context;
  private final TransportServer server;
  private final TransportClientFactory clients;
  private final String host;

  SparkNetworkTransport(SparkConf conf, SecurityManager security, String appId, String host) {
    // the application's settings (authentication, encryption, this module's io keys), two threads each
    // side unless set; built directly so that Spark 3.5 and 4.0 read it alike
    java.util.Map<String, String> settings = new java.util.HashMap<>();
    for (scala.Tuple2<String, String> kv : conf.getAll()) settings.put(kv._1(), kv._2());
    settings.putIfAbsent("spark." + MODULE + ".io.serverThreads", "2");
    settings.putIfAbsent("spark." + MODULE + ".io.clientThreads", "2");
    TransportConf tc = new TransportConf(MODULE, new MapConfigProvider(settings));
    RpcHandler handler = new RpcHandler() {
      @Override public void receive(TransportClient client, ByteBuffer message, RpcResponseCallback callback) {
        // the buffer is Netty's, released when this returns: keep a copy
        ByteBuffer copy = ByteBuffer.allocate(message.remaining());
        copy.put(message).flip();
        deliver(copy);
      }

      @Override public StreamManager getStreamManager() { return new OneForOneStreamManager(); }
    };
    this.context = new TransportContext(tc, handler, false);
    boolean auth = security != null && security.isAuthenticationEnabled();
    List<TransportServerBootstrap> sb = auth ? List.of(new AuthServerBootstrap(tc, security)) : List.of();
    List<TransportClientBootstrap> cb = auth ? List.of(new AuthClientBootstrap(tc, appId, security)) : List.of();
    this.server = context.createServer(host, 0, sb);
    this.clients = context.createClientFactory(cb);
    this.host = host;
  }

  /** This executor's transport, started on first use on the executor's host. */
  public static synchronized SparkNetworkTransport forExecutor() {
    if (current == null) {
      SparkEnv env = SparkEnv.get();
      String host = env.blockManager().blockManagerId().host();
      current = new SparkNetworkTransport(env.conf(), env.securityManager(), env.conf().getAppId(), host);
    }
    return current;
  }

  @Override public String address() { return host + ":" + server.getPort(); }

  @Override protected void send(String address, ByteBuffer message) throws IOException {
    int colon = address.lastIndexOf(':');
    if (colon <= 0) throw new IOException("not host:port: " + address);
    int port;
    try {
      port = Integer.parseInt(address.substring(colon + 1));
    } catch (NumberFormatException e) {
      throw new IOException("not host:port: " + address);
    }
    String h = address.substring(0, colon);
    if (h.startsWith("[") && h.endsWith("]")) h = h.substring(1, h.length() - 1);
    try {
      clients.createClient(h, port).send(message);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted while connecting to " + address, e);
    }
  }

  @Override public void close() {
    clients.close();
    server.close();
    context.close();
  }
}
