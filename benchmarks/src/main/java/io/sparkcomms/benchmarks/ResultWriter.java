package io.sparkcomms.benchmarks;

import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;

/** Prints result rows as a table (rank 0's stdout) and, optionally, as CSV. */
final class ResultWriter implements AutoCloseable {
  static final String[] COLUMNS = {
      "size", "count", "type", "redop", "algo", "time_us", "algbw_GBps", "busbw_GBps", "wrong", "max_rel_err",
      "median_us", "p99_us"};

  /** One row of results. */
  record Row(long size, long count, String type, String redop, String algo, double timeUs, double algbw,
             double busbw, long wrong, double maxRelErr, int iters, double medianUs, double p99Us) {}

  private final PrintStream out;
  private final Writer csv;
  private long rows;
  private long wrong;

  ResultWriter(PrintStream out, Path csvPath) {
    this.out = out;
    try {
      this.csv = csvPath == null ? null : Files.newBufferedWriter(csvPath, StandardCharsets.UTF_8);
      if (csv != null) {
        csv.write(String.join(",", COLUMNS) + "\n");
        csv.flush();
      }
    } catch (IOException e) {
      throw new UncheckedIOException("cannot write " + csvPath, e);
    }
  }

  void header() {
    out.println(String.format(Locale.ROOT, "#%11s %12s %9s %16s %6s %12s %11s %11s %7s %12s %6s %10s %10s",
        "size", "count", "type", "redop", "algo", "time_us", "algbw_GBps", "busbw_GBps", "wrong", "max_rel_err", "iters",
        "median_us", "p99_us"));
    out.flush();
  }

  void row(Row r) {
    rows++;
    wrong += r.wrong();
    out.println(String.format(Locale.ROOT, "%12d %12d %9s %16s %6s %12.2f %11.4f %11.4f %7d %12.3e %6d %10.2f %10.2f",
        r.size(), r.count(), r.type(), r.redop(), r.algo(), r.timeUs(), r.algbw(), r.busbw(), r.wrong(), r.maxRelErr(), r.iters(),
        r.medianUs(), r.p99Us()));
    out.flush();
    if (csv != null) {
      try {
        csv.write(String.format(Locale.ROOT, "%d,%d,%s,%s,%s,%.3f,%.6f,%.6f,%d,%.6e,%.3f,%.3f%n",
            r.size(), r.count(), r.type(), r.redop(), r.algo(), r.timeUs(), r.algbw(), r.busbw(), r.wrong(), r.maxRelErr(),
            r.medianUs(), r.p99Us()));
        csv.flush();
      } catch (IOException e) {
        throw new UncheckedIOException("cannot write the CSV file", e);
      }
    }
  }

  long rows() { return rows; }
  long wrong() { return wrong; }

  @Override public void close() {
    if (csv != null) {
      try {
        csv.close();
      } catch (IOException e) {
        throw new UncheckedIOException("cannot close the CSV file", e);
      }
    }
  }
}
