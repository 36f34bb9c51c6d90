package io.sparkcomms.collectives.gpu;

import org.bytedeco.javacpp.Pointer;

/** A JavaCPP pointer to a device address. Owns nothing: the address's owner frees it. */
final class DevicePointer extends Pointer {
  DevicePointer(long address) {
    this.address = address;
  }
}
