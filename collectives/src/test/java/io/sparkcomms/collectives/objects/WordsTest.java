package io.sparkcomms.collectives.objects;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Random;
import org.junit.jupiter.api.Test;

/** Bytes to INT64 words and back, at every length around a word boundary, and from an offset. */
class WordsTest {
  @Test void everyLengthRoundTripsFromAnyOffset() {
    Random rnd = new Random(5);
    for (int len = 0; len <= 33; len++) {
      byte[] b = new byte[len];
      rnd.nextBytes(b);
      int words = Words.of(len);
      assertEquals((len + 7) / 8, words);
      long[] packed = Words.pack(b, words + 1);
      assertEquals(0, packed[words], "padding is zero");
      assertArrayEquals(b, Words.unpack(packed, 0, len), "length " + len);
      long[] shifted = new long[3 + words];
      System.arraycopy(packed, 0, shifted, 3, words);
      assertArrayEquals(b, Words.unpack(shifted, 3, len), "length " + len + " at word 3");
    }
  }

  @Test void bytesAreLittleEndianInEachWord() {
    long[] w = Words.pack(new byte[] {1, 2, 3, 4, 5, 6, 7, 8, 9, (byte) 0xFF}, 2);
    assertEquals(0x0807060504030201L, w[0]);
    assertEquals(0xFF09L, w[1]);
  }
}
