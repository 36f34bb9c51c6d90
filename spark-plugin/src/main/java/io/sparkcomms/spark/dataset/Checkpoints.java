package io.sparkcomms.spark.dataset;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Training checkpoints in a directory of any Hadoop file system ({@code file://}, {@code hdfs://},
 * {@code s3a://}, ...): one file {@code ckpt-EEEEEEEE.bin} per saved epoch count, written to a
 * temporary name and renamed, so a reader never sees a partial file. Format (big-endian): magic
 * {@code SCKP}, version 1, epochs done, parameter count, parameters (float32), a flag and the
 * momentum buffer (float32) when present, the loss of every epoch done (float64).
 */
public final class Checkpoints {
  private static final int MAGIC = 0x53434b50;   // "SCKP"
  private static final int VERSION = 1;
  private static final Pattern NAME = Pattern.compile("ckpt-(\\d{8})\\.bin");

  private Checkpoints() {}

  /** One saved training state. */
  public record State(int epochsDone, float[] params, float[] velocity, double[] losses) {}

  /** Writes {@code state} into {@code dir} and deletes all but the newest {@code keep} checkpoints. */
  public static Path save(String dir, Configuration conf, State state, int keep) {
    try {
      Path d = new Path(dir);
      FileSystem fs = d.getFileSystem(conf);
      fs.mkdirs(d);
      String name = String.format("ckpt-%08d.bin", state.epochsDone());
      Path tmp = new Path(d, "_tmp-" + name + "-" + System.nanoTime());
      try (FSDataOutputStream out = fs.create(tmp, true)) {
        write(new DataOutputStream(out), state);
      }
      Path dst = new Path(d, name);
      if (fs.exists(dst)) fs.delete(dst, false);
      if (!fs.rename(tmp, dst)) throw new IOException("could not rename " + tmp + " to " + dst);
      List<Integer> epochs = list(fs, d);
      for (int i = 0; i + keep < epochs.size(); i++) {
        fs.delete(new Path(d, String.format("ckpt-%08d.bin", epochs.get(i))), false);
      }
      return dst;
    } catch (IOException e) {
      throw new UncheckedIOException("saving checkpoint to " + dir + ": " + e.getMessage(), e);
    }
  }

  /** The newest checkpoint in {@code dir}, if any (a missing directory has none). */
  public static Optional<State> latest(String dir, Configuration conf) {
    try {
      Path d = new Path(dir);
      FileSystem fs = d.getFileSystem(conf);
      List<Integer> epochs = list(fs, d);
      if (epochs.isEmpty()) return Optional.empty();
      Path p = new Path(d, String.format("ckpt-%08d.bin", epochs.get(epochs.size() - 1)));
      try (FSDataInputStream in = fs.open(p)) {
        return Optional.of(read(new DataInputStream(in), p));
      }
    } catch (IOException e) {
      throw new UncheckedIOException("reading checkpoints in " + dir + ": " + e.getMessage(), e);
    }
  }

  /** Epoch counts of the checkpoints in {@code dir}, ascending. */
  public static List<Integer> list(String dir, Configuration conf) {
    try {
      Path d = new Path(dir);
      return list(d.getFileSystem(conf), d);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static List<Integer> list(FileSystem fs, Path d) throws IOException {
    List<Integer> out = new ArrayList<>();
    FileStatus[] files;
    try {
      if (!fs.exists(d)) return out;
      files = fs.listStatus(d);
    } catch (FileNotFoundException e) {
      return out;
    }
    for (FileStatus f : files) {
      Matcher m = NAME.matcher(f.getPath().getName());
      if (f.isFile() && m.matches()) out.add(Integer.parseInt(m.group(1)));
    }
    Collections.sort(out);
    return out;
  }

  private static void write(DataOutputStream out, State s) throws IOException {
    out.writeInt(MAGIC);
    out.writeInt(VERSION);
    out.writeInt(s.epochsDone());
    out.writeInt(s.params().length);
    for (float v : s.params()) out.writeFloat(v);
    out.writeBoolean(s.velocity() != null);
    if (s.velocity() != null) for (float v : s.velocity()) out.writeFloat(v);
    out.writeInt(s.losses().length);
    for (double v : s.losses()) out.writeDouble(v);
    out.flush();
  }

  private static State read(DataInputStream in, Path p) throws IOException {
    if (in.readInt() != MAGIC) throw new IOException(p + " is not a sparkcomms checkpoint");
    int version = in.readInt();
    if (version != VERSION) throw new IOException(p + ": checkpoint version " + version + ", expected " + VERSION);
    int epochs = in.readInt();
    float[] params = new float[in.readInt()];
    for (int i = 0; i < params.length; i++) params[i] = in.readFloat();
    float[] vel = null;
    if (in.readBoolean()) {
      vel = new float[params.length];
      for (int i = 0; i < vel.length; i++) vel[i] = in.readFloat();
    }
    double[] losses = new double[in.readInt()];
    for (int i = 0; i < losses.length; i++) losses[i] = in.readDouble();
    return new State(epochs, params, vel, losses);
  }
}
