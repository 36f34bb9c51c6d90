package io.sparkcomms.collectives.math;

/** Copies between the JVM heap and a {@link DenseMath}'s memory: what a device-resident step must not do. */
public record Transfers(long uploads, long uploadBytes, long downloads, long downloadBytes) {
  public static final Transfers NONE = new Transfers(0, 0, 0, 0);

  /** The copies made since {@code earlier} was read. */
  public Transfers since(Transfers earlier) {
    return new Transfers(uploads - earlier.uploads, uploadBytes - earlier.uploadBytes, downloads - earlier.downloads,
        downloadBytes - earlier.downloadBytes);
  }

  Transfers plusUpload(long bytes) { return new Transfers(uploads + 1, uploadBytes + bytes, downloads, downloadBytes); }

  Transfers plusDownload(long bytes) { return new Transfers(uploads, uploadBytes, downloads + 1, downloadBytes + bytes); }

  @Override public String toString() {
    return uploads + " upload(s), " + uploadBytes + " B; " + downloads + " download(s), " + downloadBytes + " B";
  }
}
