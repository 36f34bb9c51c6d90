/**
 * Object collectives (torchcomms' {@code all_gather_object}, {@code broadcast_object_list},
 * {@code gather_object}): any Java object, serialized by an {@link io.sparkcomms.collectives.objects.ObjectCodec}
 * ({@link io.sparkcomms.collectives.objects.KryoObjectCodec} by default), moved over the tensor collectives of a
 * {@link io.sparkcomms.collectives.Communicator} as host tensors, so they run on the host and the GPU backend
 * alike. Entry point: {@link io.sparkcomms.collectives.objects.ObjectCollectives}.
 *
 * <p>Wire format: one header round (an INT64 allGather of a fixed header per rank: the call, root,
 * size limit, status and serialized length) that every rank checks the same way, then, only when every
 * rank that sends can, one payload round of the serialized bytes packed into INT64 words and padded
 * to the longest (allGather, or broadcast from the root). A rank that cannot serialize its object, or
 * whose object is over the limit, makes every rank raise after the header round; no payload moves.
 */
package io.sparkcomms.collectives.objects;
