package io.sparkcomms.collectives.gpu;

import org.bytedeco.javacpp.Pointer;

/** A JavaCPP pointer to an address (device memory, or pinned host memory). Owns nothing: the address's owner frees it. */
final class AddressPointer extends Pointer {
  AddressPointer(long address) {
    this.address = address;
  }
}
