package io.sparkcomms.nativeapi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * docs/configuration.md lists the GPU library's parameters as the table in core/params.def says:
 * the section between the "native parameters" markers is generated from it. Regenerate with
 * {@code mvn test -pl native -Dtest=NativeParamsDocTest -Dsparkcomms.updateConfigDoc=true}.
 */
class NativeParamsDocTest {
  static final Path DEF = Path.of("src/main/cpp/core/params.def");
  static final Path DOC = Path.of("../docs/configuration.md");
  static final String BEGIN = "<!-- BEGIN GENERATED: native parameters -->";
  static final String END = "<!-- END GENERATED: native parameters -->";

  record Param(String name, String env, String kind, String[] defaults, String range, String flags, String doc) {}

  static List<Param> parse() throws Exception {
    String def = Files.readString(DEF);
    Matcher m = Pattern.compile("^SC_PARAM\\((.*?)\"\\)\\s*$", Pattern.MULTILINE | Pattern.DOTALL).matcher(def);
    List<Param> out = new ArrayList<>();
    while (m.find()) {
      String body = m.group(1).replaceAll("\\s+", " ");
      int q = body.lastIndexOf(", \"");
      String doc = body.substring(q + 3);
      String[] f = body.substring(0, q).split(",\\s*");
      assertEquals(10, f.length, "fields of " + body);
      String env = f[1].equals("nullptr") ? "" : f[1].replace("\"", "");
      String step = f[8].trim();
      String range = value(f[6]) + ".." + value(f[7]) + (step.equals("1") ? "" : ", step " + step);
      out.add(new Param(f[0].trim(), env, f[2].trim().toLowerCase(), new String[] {value(f[3]), value(f[4]), value(f[5])},
          range, f[9].trim(), doc));
    }
    return out;
  }

  /** A C default or bound as the reference writes it: 64 * SC_M -> 64M, 1ll << 40 -> 2^40. */
  static String value(String c) {
    String t = c.trim();
    Matcher m = Pattern.compile("(\\d+) \\* SC_([KMG])").matcher(t);
    if (m.matches()) return m.group(1) + m.group(2);
    m = Pattern.compile("1ll << (\\d+)").matcher(t);
    if (m.matches()) return "2^" + m.group(1);
    return t;
  }

  static String table(List<Param> ps) {
    StringBuilder b = new StringBuilder();
    b.append("| Option key | Environment | Kind | Default (2 / 4 / 8 ranks) | Accepted | Ranks agree | Meaning |\n");
    b.append("|---|---|---|---|---|---|---|\n");
    for (Param p : ps) {
      String d = p.defaults()[0].equals(p.defaults()[1]) && p.defaults()[1].equals(p.defaults()[2]) ? p.defaults()[0]
          : String.join(" / ", p.defaults());
      if (d.equals("-1")) d = p.name().equals("fp8_format") ? "from the device" : "lp_enable";
      String agree = p.flags().contains("AGREE_LP") ? "when LP may be picked" : p.flags().contains("AGREE") ? "yes" : "no";
      if (p.flags().contains("CREATE")) agree += " (fixed at creation)";
      b.append("| `").append(p.name()).append("` | ").append(p.env().isEmpty() ? "-" : "`" + p.env() + "`").append(" | ")
          .append(p.kind()).append(" | ").append(d).append(" | ").append(p.range()).append(" | ").append(agree).append(" | ")
          .append(p.doc().replace("|", "\\|")).append(" |\n");
    }
    return b.toString();
  }

  @Test void referenceListsEveryNativeParameter() throws Exception {
    List<Param> ps = parse();
    assertTrue(ps.size() >= 20, "parsed " + ps.size() + " parameters from " + DEF);
    String doc = Files.readString(DOC);
    int a = doc.indexOf(BEGIN), z = doc.indexOf(END);
    assertTrue(a >= 0 && z > a, DOC + " lacks the markers " + BEGIN + " / " + END);
    String want = doc.substring(0, a + BEGIN.length()) + "\n" + table(ps) + doc.substring(z);
    if (Boolean.getBoolean("sparkcomms.updateConfigDoc")) Files.writeString(DOC, want);
    assertEquals(want, Files.readString(DOC), DOC + " is stale: run this test with -Dsparkcomms.updateConfigDoc=true");
  }
}
