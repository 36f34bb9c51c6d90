package io.sparkcomms.spark;

import io.sparkcomms.spark.gpu.GpuInventory;
import io.sparkcomms.spark.plugin.SparkCommsConf;
import java.util.List;
import java.util.Optional;
import org.apache.spark.SparkConf;
import org.apache.spark.api.resource.ResourceDiscoveryPlugin;
import org.apache.spark.resource.ResourceInformation;
import org.apache.spark.resource.ResourceRequest;

/**
 * Spark resource discovery for GPUs without a script: {@code
 * spark.resources.discoveryPlugin=io.sparkcomms.spark.GpuDiscoveryPlugin}. Answers requests for the
 * resource named by {@code spark.sparkcomms.resourceName} (default {@code gpu}) with the device
 * ordinals the process sees (AMD or NVIDIA, visibility variables honored; see {@link GpuInventory});
 * other resources are left to the next plugin. Same result as {@code discover-gpus.sh}.
 *
 * <p>Spark instantiates it with its no-argument constructor and calls it once per worker or
 * executor start; it keeps no state.
 */
public class GpuDiscoveryPlugin implements ResourceDiscoveryPlugin {
  @Override
  public Optional<ResourceInformation> discoverResource(ResourceRequest request, SparkConf conf) {
    String name = SparkCommsConf.of(conf).resourceName();
    if (!request.id().resourceName().equals(name)) return Optional.empty();
    List<String> addresses = GpuInventory.deviceAddresses();
    return Optional.of(new ResourceInformation(name, addresses.toArray(new String[0])));
  }
}
