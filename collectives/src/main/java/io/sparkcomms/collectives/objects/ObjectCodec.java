package io.sparkcomms.collectives.objects;

/**
 * Turns an object into bytes and back, for the object collectives ({@link ObjectCollectives}). Every
 * rank of a call must use codecs that read what the others write.
 *
 * <p>Implementations must be safe for concurrent use: the ranks of one JVM (or several communicators)
 * may share one codec.
 */
public interface ObjectCodec {
  /**
   * The bytes of {@code o}, which may be null. Any exception (or a null result) means the object cannot
   * be sent; the object collective then fails on every rank.
   *
   * @param o the object to serialize, or null
   * @return its serialized form, never null
   */
  byte[] serialize(Object o);

  /**
   * The object that {@link #serialize} wrote into {@code bytes}. An exception fails the collective on
   * this rank only.
   *
   * @param bytes a serialized form, exactly as {@link #serialize} returned it
   * @return the object, or null where null was serialized
   */
  Object deserialize(byte[] bytes);
}
