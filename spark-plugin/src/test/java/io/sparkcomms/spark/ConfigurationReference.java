package io.sparkcomms.spark;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.BiConsumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * {@code docs/configuration.md} for the tests that keep it current: its generated sections (between
 * {@code <!-- BEGIN GENERATED: name -->} and {@code <!-- END GENERATED: name -->}) and its checked
 * table of environment variables.
 */
public final class ConfigurationReference {
  /** The repository root (the tests run in the spark-plugin module directory). */
  public static final Path ROOT = Path.of(System.getProperty("user.dir")).toAbsolutePath().getParent();
  public static final Path FILE = ROOT.resolve("docs").resolve("configuration.md");
  static final String ENV_BEGIN = "<!-- BEGIN CHECKED: environment variables -->\n";
  static final String ENV_END = "<!-- END CHECKED: environment variables -->";
  private static final Pattern CODE = Pattern.compile("`([^`]+)`");

  private ConfigurationReference() {}

  /** One row of the environment table. {@code literalDefault}: the default cell is one code span. */
  public record EnvVar(String name, String defaultCell, boolean literalDefault, String meaning, String sameSetting,
      String readBy) {
    /** The default value when it is a literal (the code span's text), else null. */
    public String literal() { return literalDefault ? defaultCell.substring(1, defaultCell.length() - 1) : null; }

    /** The {@code spark.sparkcomms.*} keys the "Same setting" cell names. */
    public List<String> sparkKeys() {
      List<String> out = new ArrayList<>();
      Matcher m = CODE.matcher(sameSetting);
      while (m.find()) if (m.group(1).startsWith("spark.sparkcomms.")) out.add(m.group(1));
      return out;
    }
  }

  public static String read() {
    try {
      return Files.readString(FILE);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  public static void write(String text) {
    try {
      Files.writeString(FILE, text);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  static String begin(String name) { return "<!-- BEGIN GENERATED: " + name + " -->\n"; }

  static String end(String name) { return "<!-- END GENERATED: " + name + " -->"; }

  /** {@code text} with the body of generated section {@code name} replaced by {@code body}. */
  public static String withGenerated(String text, String name, String body) {
    int b = once(text, begin(name));
    int e = once(text, end(name));
    if (e < b) throw new AssertionError(FILE + ": the end marker of '" + name + "' comes before its begin marker");
    return text.substring(0, b + begin(name).length()) + body + text.substring(e);
  }

  /** The rows of the environment table, in order. */
  public static List<EnvVar> environmentTable(String text) {
    int b = once(text, ENV_BEGIN);
    int e = once(text, ENV_END);
    String[] lines = text.substring(b + ENV_BEGIN.length(), e).split("\n");
    if (lines.length < 2 || !lines[0].startsWith("| Variable |") || !lines[1].startsWith("|---")) {
      throw new AssertionError(FILE + ": the environment table lacks its header");
    }
    List<EnvVar> out = new ArrayList<>();
    for (int i = 2; i < lines.length; i++) {
      String line = lines[i].trim();
      if (!line.startsWith("|") || !line.endsWith("|")) throw new AssertionError(FILE + ": not a table row: " + line);
      String[] cells = line.substring(1, line.length() - 1).split("\\|", -1);
      if (cells.length != 5) throw new AssertionError(FILE + ": a row needs 5 cells: " + line);
      for (int c = 0; c < cells.length; c++) cells[c] = cells[c].trim();
      Matcher name = Pattern.compile("`([A-Z][A-Z0-9_]*)`").matcher(cells[0]);
      if (!name.matches()) throw new AssertionError(FILE + ": the variable cell is not one `NAME`: " + line);
      boolean literal = cells[1].matches("`[^`]+`");
      out.add(new EnvVar(name.group(1), cells[1], literal, cells[2], cells[3], cells[4]));
    }
    return out;
  }

  /** The names of the rows read by {@code readBy}, sorted. */
  public static Set<String> namesReadBy(List<EnvVar> table, String readBy) {
    Set<String> out = new TreeSet<>();
    for (EnvVar v : table) if (v.readBy().equals(readBy)) out.add(v.name());
    return out;
  }

  private static int once(String text, String marker) {
    int i = text.indexOf(marker);
    if (i < 0) throw new AssertionError(FILE + " lacks the marker " + marker.trim());
    if (text.indexOf(marker, i + 1) >= 0) throw new AssertionError(FILE + " has the marker " + marker.trim() + " twice");
    return i;
  }

  /**
   * An environment that records every variable looked up by name ({@code get}, {@code getOrDefault},
   * {@code containsKey}). With {@code iterable} false, walking it (entrySet, keySet, values, forEach)
   * fails: the reader would see variables the recording cannot name.
   */
  public static final class RecordingEnv extends HashMap<String, String> {
    private static final long serialVersionUID = 1L;
    private final Set<String> read = new TreeSet<>();
    private final boolean iterable;

    public RecordingEnv(Map<String, String> values, boolean iterable) {
      this.iterable = iterable;
      values.forEach(super::put);
    }

    /** The variables looked up so far, sorted. */
    public Set<String> read() { return read; }

    @Override public String get(Object key) {
      read.add((String) key);
      return super.get(key);
    }

    @Override public String getOrDefault(Object key, String defaultValue) {
      read.add((String) key);
      return super.getOrDefault(key, defaultValue);
    }

    @Override public boolean containsKey(Object key) {
      read.add((String) key);
      return super.containsKey(key);
    }

    @Override public Set<Map.Entry<String, String>> entrySet() { walk(); return super.entrySet(); }

    @Override public Set<String> keySet() { walk(); return super.keySet(); }

    @Override public Collection<String> values() { walk(); return super.values(); }

    @Override public void forEach(BiConsumer<? super String, ? super String> action) { walk(); super.forEach(action); }

    private void walk() {
      if (!iterable) {
        throw new AssertionError("the environment was iterated, so the variables read cannot be listed: read the "
            + "variables by name, or extend the environment reference tests");
      }
    }
  }
}
