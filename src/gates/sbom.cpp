#include "gates/sbom.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "util/image_ref.h"
#include "util/strings.h"

namespace kiln {

namespace {

// The SPDX License List 3.28.0 (2026-02-20) and its exceptions, without deprecated ids: a
// license outside it is declared as a LicenseRef with its text, so a list that has aged makes a
// newer id less exact, never the document invalid.
constexpr std::string_view k_spdx_license_ids =
    "0BSD 3D-Slicer-1.0 AAL Abstyles AdaCore-doc Adobe-2006 Adobe-Display-PostScript Adobe-Glyph "
    "Adobe-Utopia ADSL Advanced-Cryptics-Dictionary AFL-1.1 AFL-1.2 AFL-2.0 AFL-2.1 AFL-3.0 "
    "Afmparse AGPL-1.0-only AGPL-1.0-or-later AGPL-3.0-only AGPL-3.0-or-later Aladdin "
    "ALGLIB-Documentation AMD-newlib AMDPLPA AML AML-glslang AMPAS ANTLR-PD ANTLR-PD-fallback "
    "any-OSI any-OSI-perl-modules Apache-1.0 Apache-1.1 Apache-2.0 APAFML APL-1.0 App-s2p "
    "APSL-1.0 APSL-1.1 APSL-1.2 APSL-2.0 Arphic-1999 Artistic-1.0 Artistic-1.0-cl8 "
    "Artistic-1.0-Perl Artistic-2.0 Artistic-dist Aspell-RU ASWF-Digital-Assets-1.0 "
    "ASWF-Digital-Assets-1.1 Baekmuk Bahyph Barr bcrypt-Solar-Designer Beerware "
    "Bitstream-Charter Bitstream-Vera BitTorrent-1.0 BitTorrent-1.1 blessing BlueOak-1.0.0 "
    "Boehm-GC Boehm-GC-without-fee BOLA-1.1 Borceux Brian-Gladman-2-Clause "
    "Brian-Gladman-3-Clause BSD-1-Clause BSD-2-Clause BSD-2-Clause-Darwin "
    "BSD-2-Clause-first-lines BSD-2-Clause-Patent BSD-2-Clause-pkgconf-disclaimer "
    "BSD-2-Clause-Views BSD-3-Clause BSD-3-Clause-acpica BSD-3-Clause-Attribution "
    "BSD-3-Clause-Clear BSD-3-Clause-flex BSD-3-Clause-HP BSD-3-Clause-LBNL "
    "BSD-3-Clause-Modification BSD-3-Clause-No-Military-License BSD-3-Clause-No-Nuclear-License "
    "BSD-3-Clause-No-Nuclear-License-2014 BSD-3-Clause-No-Nuclear-Warranty BSD-3-Clause-Open-MPI "
    "BSD-3-Clause-Sun BSD-3-Clause-Tso BSD-4-Clause BSD-4-Clause-Shortened BSD-4-Clause-UC "
    "BSD-4.3RENO BSD-4.3TAHOE BSD-Advertising-Acknowledgement BSD-Attribution-HPND-disclaimer "
    "BSD-Inferno-Nettverk BSD-Mark-Modifications BSD-Protection BSD-Source-beginning-file "
    "BSD-Source-Code BSD-Systemics BSD-Systemics-W3Works BSL-1.0 Buddy BUSL-1.1 bzip2-1.0.6 "
    "C-UDA-1.0 CAL-1.0 CAL-1.0-Combined-Work-Exception Caldera Caldera-no-preamble CAPEC-tou "
    "Catharon CATOSL-1.1 CC-BY-1.0 CC-BY-2.0 CC-BY-2.5 CC-BY-2.5-AU CC-BY-3.0 CC-BY-3.0-AT "
    "CC-BY-3.0-AU CC-BY-3.0-DE CC-BY-3.0-IGO CC-BY-3.0-NL CC-BY-3.0-US CC-BY-4.0 CC-BY-NC-1.0 "
    "CC-BY-NC-2.0 CC-BY-NC-2.5 CC-BY-NC-3.0 CC-BY-NC-3.0-DE CC-BY-NC-4.0 CC-BY-NC-ND-1.0 "
    "CC-BY-NC-ND-2.0 CC-BY-NC-ND-2.5 CC-BY-NC-ND-3.0 CC-BY-NC-ND-3.0-DE CC-BY-NC-ND-3.0-IGO "
    "CC-BY-NC-ND-4.0 CC-BY-NC-SA-1.0 CC-BY-NC-SA-2.0 CC-BY-NC-SA-2.0-DE CC-BY-NC-SA-2.0-FR "
    "CC-BY-NC-SA-2.0-UK CC-BY-NC-SA-2.5 CC-BY-NC-SA-3.0 CC-BY-NC-SA-3.0-DE CC-BY-NC-SA-3.0-IGO "
    "CC-BY-NC-SA-4.0 CC-BY-ND-1.0 CC-BY-ND-2.0 CC-BY-ND-2.5 CC-BY-ND-3.0 CC-BY-ND-3.0-DE "
    "CC-BY-ND-4.0 CC-BY-SA-1.0 CC-BY-SA-2.0 CC-BY-SA-2.0-UK CC-BY-SA-2.1-JP CC-BY-SA-2.5 "
    "CC-BY-SA-3.0 CC-BY-SA-3.0-AT CC-BY-SA-3.0-DE CC-BY-SA-3.0-IGO CC-BY-SA-4.0 CC-PDDC "
    "CC-PDM-1.0 CC-SA-1.0 CC0-1.0 CDDL-1.0 CDDL-1.1 CDL-1.0 CDLA-Permissive-1.0 "
    "CDLA-Permissive-2.0 CDLA-Sharing-1.0 CECILL-1.0 CECILL-1.1 CECILL-2.0 CECILL-2.1 CECILL-B "
    "CECILL-C CERN-OHL-1.1 CERN-OHL-1.2 CERN-OHL-P-2.0 CERN-OHL-S-2.0 CERN-OHL-W-2.0 CFITSIO "
    "check-cvs checkmk ClArtistic Clips CMU-Mach CMU-Mach-nodoc CNRI-Jython CNRI-Python "
    "CNRI-Python-GPL-Compatible COIL-1.0 Community-Spec-1.0 Condor-1.1 copyleft-next-0.3.0 "
    "copyleft-next-0.3.1 Cornell-Lossless-JPEG CPAL-1.0 CPL-1.0 CPOL-1.02 Cronyx Crossword "
    "CryptoSwift CrystalStacker CUA-OPL-1.0 Cube curl cve-tou D-FSL-1.0 DEC-3-Clause diffmark "
    "DL-DE-BY-2.0 DL-DE-ZERO-2.0 DOC DocBook-DTD DocBook-Schema DocBook-Stylesheet DocBook-XML "
    "Dotseqn DRL-1.0 DRL-1.1 DSDP dtoa dvipdfm ECL-1.0 ECL-2.0 EFL-1.0 EFL-2.0 eGenix "
    "Elastic-2.0 Entessa EPICS EPL-1.0 EPL-2.0 ErlPL-1.1 ESA-PL-permissive-2.4 "
    "ESA-PL-strong-copyleft-2.4 ESA-PL-weak-copyleft-2.4 etalab-2.0 EUDatagrid EUPL-1.0 EUPL-1.1 "
    "EUPL-1.2 Eurosym Fair FBM FDK-AAC Ferguson-Twofish Frameworx-1.0 FreeBSD-DOC FreeImage "
    "FSFAP FSFAP-no-warranty-disclaimer FSFUL FSFULLR FSFULLRSD FSFULLRWD FSL-1.1-ALv2 "
    "FSL-1.1-MIT FTL Furuseth fwlw Game-Programming-Gems GCR-docs GD generic-xts "
    "GFDL-1.1-invariants-only GFDL-1.1-invariants-or-later GFDL-1.1-no-invariants-only "
    "GFDL-1.1-no-invariants-or-later GFDL-1.1-only GFDL-1.1-or-later GFDL-1.2-invariants-only "
    "GFDL-1.2-invariants-or-later GFDL-1.2-no-invariants-only GFDL-1.2-no-invariants-or-later "
    "GFDL-1.2-only GFDL-1.2-or-later GFDL-1.3-invariants-only GFDL-1.3-invariants-or-later "
    "GFDL-1.3-no-invariants-only GFDL-1.3-no-invariants-or-later GFDL-1.3-only GFDL-1.3-or-later "
    "Giftware GL2PS Glide Glulxe GLWTPL gnuplot GPL-1.0-only GPL-1.0-or-later GPL-2.0-only "
    "GPL-2.0-or-later GPL-3.0-only GPL-3.0-or-later Graphics-Gems gSOAP-1.3b gtkbook Gutmann "
    "HaskellReport HDF5 hdparm HIDAPI Hippocratic-2.1 HP-1986 HP-1989 HPND HPND-DEC HPND-doc "
    "HPND-doc-sell HPND-export-US HPND-export-US-acknowledgement HPND-export-US-modify "
    "HPND-export2-US HPND-Fenneberg-Livingston HPND-INRIA-IMAG HPND-Intel HPND-Kevlin-Henney "
    "HPND-Markus-Kuhn HPND-merchantability-variant HPND-MIT-disclaimer HPND-Netrek HPND-Pbmplus "
    "HPND-sell-MIT-disclaimer-xserver HPND-sell-regexpr HPND-sell-variant "
    "HPND-sell-variant-critical-systems HPND-sell-variant-MIT-disclaimer "
    "HPND-sell-variant-MIT-disclaimer-rev HPND-SMC HPND-UC HPND-UC-export-US HTMLTIDY "
    "hyphen-bulgarian IBM-pibs ICU IEC-Code-Components-EULA IJG IJG-short ImageMagick iMatix "
    "Imlib2 Info-ZIP Inner-Net-2.0 InnoSetup Intel Intel-ACPI Interbase-1.0 IPA IPL-1.0 ISC "
    "ISC-Veillard ISO-permission Jam JasPer-2.0 jove JPL-image JPNIC JSON Kastrup Kazlib "
    "Knuth-CTAN LAL-1.2 LAL-1.3 Latex2e Latex2e-translated-notice Leptonica LGPL-2.0-only "
    "LGPL-2.0-or-later LGPL-2.1-only LGPL-2.1-or-later LGPL-3.0-only LGPL-3.0-or-later LGPLLR "
    "Libpng libpng-1.6.35 libpng-2.0 libselinux-1.0 libtiff libutil-David-Nugent LiLiQ-P-1.1 "
    "LiLiQ-R-1.1 LiLiQ-Rplus-1.1 Linux-man-pages-1-para Linux-man-pages-copyleft "
    "Linux-man-pages-copyleft-2-para Linux-man-pages-copyleft-var Linux-OpenIB LOOP LPD-document "
    "LPL-1.0 LPL-1.02 LPPL-1.0 LPPL-1.1 LPPL-1.2 LPPL-1.3a LPPL-1.3c lsof Lucida-Bitmap-Fonts "
    "LZMA-SDK-9.11-to-9.20 LZMA-SDK-9.22 Mackerras-3-Clause Mackerras-3-Clause-acknowledgment "
    "magaz mailprio MakeIndex man2html Martin-Birgmeier McPhee-slideshow metamail Minpack MIPS "
    "MirOS MIT MIT-0 MIT-advertising MIT-Click MIT-CMU MIT-enna MIT-feh MIT-Festival "
    "MIT-Khronos-old MIT-Modern-Variant MIT-open-group MIT-STK MIT-testregex MIT-Wu MITNFA "
    "MMIXware MMPL-1.0.1 Motosoto MPEG-SSG mpi-permissive mpich2 MPL-1.0 MPL-1.1 MPL-2.0 "
    "MPL-2.0-no-copyleft-exception mplus MS-LPL MS-PL MS-RL MTLL MulanPSL-1.0 MulanPSL-2.0 "
    "Multics Mup NAIST-2003 NASA-1.3 Naumen NBPL-1.0 NCBI-PD NCGL-UK-2.0 NCL NCSA NetCDF "
    "Newsletr NGPL ngrep NICTA-1.0 NIST-PD NIST-PD-fallback NIST-PD-TNT NIST-Software NLOD-1.0 "
    "NLOD-2.0 NLPL Nokia NOSL Noweb NPL-1.0 NPL-1.1 NPOSL-3.0 NRL NTIA-PD NTP NTP-0 O-UDA-1.0 "
    "OAR OCCT-PL OCLC-2.0 ODbL-1.0 ODC-By-1.0 OFFIS OFL-1.0 OFL-1.0-no-RFN OFL-1.0-RFN OFL-1.1 "
    "OFL-1.1-no-RFN OFL-1.1-RFN OGC-1.0 OGDL-Taiwan-1.0 OGL-Canada-2.0 OGL-UK-1.0 OGL-UK-2.0 "
    "OGL-UK-3.0 OGTSL OLDAP-1.1 OLDAP-1.2 OLDAP-1.3 OLDAP-1.4 OLDAP-2.0 OLDAP-2.0.1 OLDAP-2.1 "
    "OLDAP-2.2 OLDAP-2.2.1 OLDAP-2.2.2 OLDAP-2.3 OLDAP-2.4 OLDAP-2.5 OLDAP-2.6 OLDAP-2.7 "
    "OLDAP-2.8 OLFL-1.3 OML OpenMDW-1.0 OpenPBS-2.3 OpenSSL OpenSSL-standalone OpenVision "
    "OPL-1.0 OPL-UK-3.0 OPUBL-1.0 OSC-1.0 OSET-PL-2.1 OSL-1.0 OSL-1.1 OSL-2.0 OSL-2.1 OSL-3.0 "
    "OSSP PADL ParaType-Free-Font-1.3 Parity-6.0.0 Parity-7.0.0 PDDL-1.0 PHP-3.0 PHP-3.01 Pixar "
    "pkgconf Plexus pnmstitch PolyForm-Noncommercial-1.0.0 PolyForm-Small-Business-1.0.0 "
    "PostgreSQL PPL PSF-2.0 psfrag psutils Python-2.0 Python-2.0.1 python-ldap Qhull QPL-1.0 "
    "QPL-1.0-INRIA-2004 radvd Rdisc RHeCos-1.1 RPL-1.1 RPL-1.5 RPSL-1.0 RSA-MD RSCPL Ruby "
    "Ruby-pty SAX-PD SAX-PD-2.0 Saxpath SCEA SchemeReport Sendmail Sendmail-8.23 "
    "Sendmail-Open-Source-1.1 SGI-B-1.0 SGI-B-1.1 SGI-B-2.0 SGI-OpenGL SGMLUG-PM SGP4 SHL-0.5 "
    "SHL-0.51 SimPL-2.0 SISSL SISSL-1.2 SL Sleepycat SMAIL-GPL SMLNJ SMPPL SNIA snprintf SOFA "
    "softSurfer Soundex Spencer-86 Spencer-94 Spencer-99 SPL-1.0 ssh-keyscan SSH-OpenSSH "
    "SSH-short SSLeay-standalone SSPL-1.0 SugarCRM-1.1.3 SUL-1.0 Sun-PPP Sun-PPP-2000 SunPro SWL "
    "swrule Symlinks TAPR-OHL-1.0 TCL TCP-wrappers TekHVC TermReadKey TGPPL-1.0 ThirdEye "
    "threeparttable TMate TORQUE-1.1 TOSL TPDL TPL-1.0 TrustedQSL TTWL TTYP0 TU-Berlin-1.0 "
    "TU-Berlin-2.0 Ubuntu-font-1.0 UCAR UCL-1.0 ulem UMich-Merit Unicode-3.0 Unicode-DFS-2015 "
    "Unicode-DFS-2016 Unicode-TOU UnixCrypt Unlicense Unlicense-libtelnet Unlicense-libwhirlpool "
    "UnRAR UPL-1.0 URT-RLE Vim Vixie-Cron VOSTROM VSL-1.0 W3C W3C-19980720 W3C-20150513 w3m "
    "Watcom-1.0 Widget-Workshop WordNet Wsuipa WTFNMFPL WTFPL wwl X11 "
    "X11-distribute-modifications-variant X11-no-permit-persons X11-swapped Xdebug-1.03 Xerox "
    "Xfig XFree86-1.1 xinetd xkeyboard-config-Zinoviev xlock Xnet xpp XSkat xzoom YPL-1.0 "
    "YPL-1.1 Zed Zeeff Zend-2.0 Zimbra-1.3 Zimbra-1.4 Zlib zlib-acknowledgement ZPL-1.1 ZPL-2.0 "
    "ZPL-2.1";
constexpr std::string_view k_spdx_exception_ids =
    "389-exception Asterisk-exception Autoconf-exception-2.0 Autoconf-exception-3.0 "
    "Autoconf-exception-generic Autoconf-exception-generic-3.0 Autoconf-exception-macro "
    "Bison-exception-1.24 Bison-exception-2.2 Bootloader-exception Classpath-exception-2.0 "
    "CLISP-exception-2.0 cryptsetup-OpenSSL-exception DigiRule-FOSS-exception eCos-exception-2.0 "
    "Fawkes-Runtime-exception FLTK-exception fmt-exception Font-exception-2.0 "
    "freertos-exception-2.0 GCC-exception-2.0 GCC-exception-2.0-note GCC-exception-3.1 "
    "Gmsh-exception GNAT-exception GNOME-examples-exception GNU-compiler-exception "
    "gnu-javamail-exception GPL-3.0-interface-exception GPL-3.0-linking-exception "
    "GPL-3.0-linking-source-exception GPL-CC-1.0 GStreamer-exception-2005 "
    "GStreamer-exception-2008 i2p-gpl-java-exception KiCad-libraries-exception "
    "LGPL-3.0-linking-exception libpri-OpenH323-exception Libtool-exception Linux-syscall-note "
    "LLGPL LLVM-exception LZMA-exception mif-exception OCaml-LGPL-linking-exception "
    "OCCT-exception-1.0 OpenJDK-assembly-exception-1.0 openvpn-openssl-exception "
    "PS-or-PDF-font-exception-20170817 QPL-1.0-INRIA-2004-exception Qt-GPL-exception-1.0 "
    "Qt-LGPL-exception-1.1 Qwt-exception-1.0 SANE-exception SHL-2.0 SHL-2.1 stunnel-exception "
    "SWI-exception Swift-exception Texinfo-exception u-boot-exception-2.0 UBDL-exception "
    "Universal-FOSS-exception-1.0 vsftpd-openssl-exception WxWindows-exception-3.1 "
    "x11vnc-openssl-exception";

/// Deprecated GNU ids, read as the SPDX list maps them: `GPL-2.0` is GPL-2.0-only and `GPL-2.0+`
/// GPL-2.0-or-later (Alpine and Python metadata still write them). Other deprecated ids, which
/// validators do not all know, become LicenseRefs.
constexpr std::string_view k_deprecated_gnu_ids =
    "AGPL-1.0 AGPL-3.0 GFDL-1.1 GFDL-1.2 GFDL-1.3 GPL-1.0 GPL-2.0 GPL-3.0 LGPL-2.0 LGPL-2.1 "
    "LGPL-3.0";

/// Calls `each` with every line of `text`, without its `\n` or the `\r` of a CRLF file.
template <typename Each> void each_line(std::string_view text, Each each) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line = text.substr(start, end - start);
    if (line.ends_with('\r')) {
      line.remove_suffix(1);
    }
    each(line);
    start = end + 1;
  }
}

bool is_blank(char c) {
  return c == ' ' || c == '\t';
}

bool is_ascii_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && lower(a) == lower(b);
}

std::string_view base_name(std::string_view path) {
  return path.substr(path.rfind('/') + 1);
}

/// `path` without its last component, "" when it has one component only.
std::string_view dir_name(std::string_view path) {
  std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : path.substr(0, slash);
}

/// A folder or file name `suffix` ends and something precedes: `foo.dist-info`, not `.dist-info`.
bool named_with(std::string_view name, std::string_view suffix) {
  return name.size() > suffix.size() && name.ends_with(suffix);
}

/// The fields of deb822 paragraphs (dpkg's status, email-style headers): `field(name, value)`
/// for a `Name: value` line, `more(line)` for a continuation line (it starts with a space or
/// tab) and `end()` after each paragraph. A line that is neither is skipped, as is a blank one
/// before the first field.
template <typename Field, typename More, typename End>
void each_field(std::string_view text, Field field, More more, End end) {
  bool open = false;
  each_line(text, [&](std::string_view line) {
    if (line.empty()) {
      if (open) {
        end();
      }
      open = false;
      return;
    }
    if (is_blank(line.front())) {
      if (open) {
        more(line);
      }
      return;
    }
    std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return;
    }
    open = true;
    field(line.substr(0, colon), trim(line.substr(colon + 1)));
  });
  if (open) {
    end();
  }
}

/// Sets `slot` from the first occurrence of a field only: dpkg refuses a repeated field, and
/// the first is as good a guess as the last.
void set_once(std::optional<std::string_view>& slot, std::string_view value) {
  if (!slot) {
    slot = value;
  }
}

/// `word` of `text` split at spaces and tabs, from 0; "" past the last.
std::string_view word_at(std::string_view text, std::size_t word) {
  std::size_t at = 0;
  for (std::size_t index = 0;; ++index) {
    while (at < text.size() && is_blank(text[at])) {
      ++at;
    }
    std::size_t end = at;
    while (end < text.size() && !is_blank(text[end])) {
      ++end;
    }
    if (at == end || index == word) {
      return text.substr(at, end - at);
    }
    at = end;
  }
}

/// Python's metadata spells an unset field UNKNOWN (setuptools before 62 wrote it for each).
std::string known(std::string_view value) {
  value = trim(value);
  return value == "UNKNOWN" ? std::string() : std::string(value);
}

/// `text` as UTF-8, each byte that is not part of a valid sequence replaced by U+FFFD: JSON
/// holds only UTF-8, and a database may hold Latin-1 names or garbage.
std::string utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    std::size_t bad = first_invalid_utf8(text);
    if (bad == std::string_view::npos) {
      out += text;
      break;
    }
    out += text.substr(0, bad);
    out += "\xEF\xBF\xBD";
    text.remove_prefix(bad + 1);
  }
  return out;
}

/// Percent-encoding as the purl spec's canonical form has it: all but `A-Za-z0-9.-_~` and `:`.
std::string purl_encode(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (is_ascii_alnum(c) || c == '.' || c == '-' || c == '_' || c == '~' || c == ':') {
      out += c;
    } else {
      out += fmt::format("%{:02X}", static_cast<unsigned char>(c));
    }
  }
  return out;
}

/// PEP 503: lower case, each run of `-`, `_` and `.` one `-`.
std::string pep503_name(std::string_view name) {
  std::string out;
  bool in_run = false;
  for (char c : lower(name)) {
    bool separator = c == '-' || c == '_' || c == '.';
    if (separator && !in_run) {
      out += '-';
    } else if (!separator) {
      out += c;
    }
    in_run = separator;
  }
  return out;
}

/// A purl: `pkg:type/[namespace/]name[@version][?key=value&...]`, qualifiers given sorted by key
/// and left out when empty.
std::string purl(std::string_view type, std::string_view namespace_, std::string_view name,
                 std::string_view version,
                 const std::vector<std::pair<std::string_view, std::string>>& qualifiers) {
  std::string out = fmt::format("pkg:{}/", type);
  if (!namespace_.empty()) {
    out += purl_encode(namespace_) + "/";
  }
  out += purl_encode(name);
  if (!version.empty()) {
    out += "@" + purl_encode(version);
  }
  char separator = '?';
  for (const auto& [key, value] : qualifiers) {
    if (!value.empty()) {
      out += fmt::format("{}{}={}", separator, key, purl_encode(value));
      separator = '&';
    }
  }
  return out;
}

/// The part of an SPDXID a text gives: SPDX allows only `[A-Za-z0-9.-]` after `SPDXRef-`.
std::string id_part(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (!is_ascii_alnum(c) && c != '.') {
      c = '-';
    }
  }
  return out;
}

/// Identifiers unique within one document: a taken one gets `-2`, `-3`, ... The next suffix of
/// each base is remembered, so n packages of one name cost n tries, not n².
class UniqueIds {
public:
  std::string take(const std::string& base) {
    if (m_used.insert(base).second) {
      return base;
    }
    std::size_t& next = m_next.try_emplace(base, 2).first->second;
    while (true) {
      std::string id = fmt::format("{}-{}", base, next++);
      if (m_used.insert(id).second) {
        return id;
      }
    }
  }

private:
  std::set<std::string> m_used;
  std::unordered_map<std::string, std::size_t> m_next;
};

/// The ids of one SPDX list by lower case, each with its listed spelling: SPDX matches license
/// ids whatever their case (SPDX 2.3 annex D.2).
class IdList {
public:
  explicit IdList(std::string_view ids) {
    for (const std::string& id : split(ids, ' ')) {
      m_ids.emplace(lower(id), id);
    }
  }
  const std::string* find(std::string_view id) const {
    auto it = m_ids.find(lower(id));
    return it == m_ids.end() ? nullptr : &it->second;
  }

private:
  std::map<std::string, std::string> m_ids;
};

const IdList& license_ids() {
  static const IdList ids(k_spdx_license_ids);
  return ids;
}

const IdList& deprecated_gnu_ids() {
  static const IdList ids(k_deprecated_gnu_ids);
  return ids;
}

const IdList& exception_ids() {
  static const IdList ids(k_spdx_exception_ids);
  return ids;
}

/// An SPDX license expression (SPDX 2.3 annex D) rebuilt with each id as listed and the
/// operators in upper case; nullopt when the text is not one or names an id the lists lack.
class LicenseExpression {
public:
  static std::optional<std::string> normalise(std::string_view text) {
    LicenseExpression parser;
    if (!parser.tokenise(text)) {
      return std::nullopt;
    }
    auto expression = parser.disjunction(0);
    if (!expression || parser.m_at != parser.m_tokens.size()) {
      return std::nullopt;
    }
    return expression;
  }

private:
  /// Parentheses nest no deeper than this: a license is not a stack-depth test.
  static constexpr int k_max_depth = 16;

  bool tokenise(std::string_view text) {
    std::size_t at = 0;
    while (at < text.size()) {
      char c = text[at];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++at;
      } else if (c == '(' || c == ')') {
        m_tokens.push_back(text.substr(at++, 1));
      } else {
        std::size_t end = at;
        while (end < text.size() && (is_ascii_alnum(text[end]) || text[end] == '.' ||
                                     text[end] == '-' || text[end] == '+')) {
          ++end;
        }
        if (end == at) {
          return false;
        }
        m_tokens.push_back(text.substr(at, end - at));
        at = end;
      }
    }
    return true;
  }

  bool next_is(std::string_view word) const {
    return m_at < m_tokens.size() && iequals(m_tokens[m_at], word);
  }

  std::optional<std::string> disjunction(int depth) {
    auto out = conjunction(depth);
    while (out && next_is("OR")) {
      ++m_at;
      auto right = conjunction(depth);
      if (!right) {
        return std::nullopt;
      }
      *out += " OR " + *right;
    }
    return out;
  }

  std::optional<std::string> conjunction(int depth) {
    auto out = term(depth);
    while (out && next_is("AND")) {
      ++m_at;
      auto right = term(depth);
      if (!right) {
        return std::nullopt;
      }
      *out += " AND " + *right;
    }
    return out;
  }

  std::optional<std::string> term(int depth) {
    if (m_at >= m_tokens.size()) {
      return std::nullopt;
    }
    if (m_tokens[m_at] == "(") {
      ++m_at;
      auto inner = depth < k_max_depth ? disjunction(depth + 1) : std::nullopt;
      if (!inner || m_at >= m_tokens.size() || m_tokens[m_at] != ")") {
        return std::nullopt;
      }
      ++m_at;
      return "(" + *inner + ")";
    }
    std::string_view word = m_tokens[m_at++];
    bool or_later = word.ends_with('+');
    if (or_later) {
      word.remove_suffix(1);
    }
    if (word.find('+') != std::string_view::npos) {
      return std::nullopt;
    }
    std::string out;
    if (const std::string* id = license_ids().find(word)) {
      out = *id + (or_later ? "+" : "");
    } else if (const std::string* gnu = deprecated_gnu_ids().find(word)) {
      out = *gnu + (or_later ? "-or-later" : "-only");
    } else {
      return std::nullopt;
    }
    if (next_is("WITH")) {
      ++m_at;
      const std::string* exception =
          m_at < m_tokens.size() ? exception_ids().find(m_tokens[m_at]) : nullptr;
      if (exception == nullptr) {
        return std::nullopt;
      }
      ++m_at;
      out += " WITH " + *exception;
    }
    return out;
  }

  std::vector<std::string_view> m_tokens;
  std::size_t m_at = 0;
};

/// The licenses of one document: an SPDX expression as it is, any other text as a LicenseRef
/// declared once with that text (SPDX requires every LicenseRef a document uses to be declared).
class DeclaredLicenses {
public:
  explicit DeclaredLicenses(UniqueIds& ids) : m_ids(ids) {}

  std::string declare(std::string_view license) {
    std::string text = utf8(trim(license));
    if (text.empty() || text == "UNKNOWN" || text == "NOASSERTION") {
      return "NOASSERTION";
    }
    if (auto expression = LicenseExpression::normalise(text)) {
      return *expression;
    }
    auto [it, added] = m_refs.try_emplace(text);
    if (added) {
      // A readable id from the text's start: `BSD` becomes LicenseRef-BSD.
      constexpr std::size_t k_id_chars = 40;
      std::string_view head = std::string_view(text).substr(0, k_id_chars);
      it->second = m_ids.take("LicenseRef-" + id_part(head));
      std::string_view first_line = head.substr(0, head.find('\n'));
      m_infos.push_back(
          {{"licenseId", it->second}, {"extractedText", text}, {"name", utf8(trim(first_line))}});
    }
    return it->second;
  }

  const nlohmann::json& infos() const { return m_infos; }

private:
  UniqueIds& m_ids;
  std::map<std::string, std::string> m_refs;
  nlohmann::json m_infos = nlohmann::json::array();
};

/// An SPDX actor from `Name <email>` (or a bare name or address): `Person: Name (email)`. SPDX
/// readers take the name up to the first `(`, so parentheses in it are dropped.
std::string spdx_actor(std::string_view raw) {
  std::string text = utf8(raw);
  std::replace_if(
      text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; }, ' ');
  std::string_view view = trim(text);
  std::string_view name = view;
  std::string_view email;
  std::size_t open = view.find('<');
  std::size_t close = open == std::string_view::npos ? open : view.find('>', open);
  if (close != std::string_view::npos) {
    name = trim(view.substr(0, open));
    email = trim(view.substr(open + 1, close - open - 1));
  }
  auto clean = [](std::string_view part) {
    std::string out;
    for (char c : part) {
      if (c != '(' && c != ')' && c != '"') {
        out += c;
      }
    }
    return std::string(trim(out));
  };
  std::string person = clean(name);
  std::string address = clean(email);
  if (person.empty()) {
    std::swap(person, address);
  }
  if (person.empty()) {
    return "NOASSERTION";
  }
  return address.empty() ? "Person: " + person : fmt::format("Person: {} ({})", person, address);
}

/// Where a package is installed, for telling a second record of one install from a second
/// install: a Python package's site folder (Debian's python3-cryptography ships both a
/// .dist-info and an .egg-info for one install), else its database file.
std::string install_place(const Package& package) {
  if (package.ecosystem != "python") {
    return package.path;
  }
  std::string_view metadata_dir = named_with(package.path, ".egg-info")
                                      ? std::string_view(package.path)
                                      : dir_name(package.path);
  return std::string(dir_name(metadata_dir));
}

std::string install_name(const Package& package) {
  return package.ecosystem == "python" ? pep503_name(package.name) : package.name;
}

/// The image's purl: `pkg:oci/<last path part>@<digest>?arch=&repository_url=&tag=`.
std::string image_url(const SbomSubject& subject) {
  auto parsed = parse_image_ref(subject.name);
  std::string repository = parsed ? parsed->repository() : subject.name;
  std::string_view reference = repository;
  std::string_view tag = parsed ? std::string_view(parsed->tag) : std::string_view();
  std::string_view platform = subject.platform;
  std::string_view arch = platform.substr(std::min(platform.find('/'), platform.size()));
  if (!arch.empty()) {
    arch.remove_prefix(1);
    arch = arch.substr(0, arch.find('/'));
  }
  std::string name = lower(base_name(reference));
  return purl("oci", "", name.empty() ? std::string_view("image") : std::string_view(name),
              subject.digest,
              {{"arch", std::string(arch)},
               {"repository_url", std::string(reference)},
               {"tag", std::string(tag)}});
}

/// The image digest as an SPDX checksum, when it is one SPDX names (`sha256:` and 64 hex).
std::optional<nlohmann::json> digest_checksum(std::string_view digest) {
  std::size_t colon = digest.find(':');
  if (colon == std::string_view::npos) {
    return std::nullopt;
  }
  std::string_view algorithm = digest.substr(0, colon);
  std::string_view hex = digest.substr(colon + 1);
  std::size_t expected = algorithm == "sha256" ? 64 : algorithm == "sha512" ? 128 : 0;
  bool is_hex = std::all_of(hex.begin(), hex.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
  if (expected == 0 || hex.size() != expected || !is_hex) {
    return std::nullopt;
  }
  return nlohmann::json{{"algorithm", algorithm == "sha256" ? "SHA256" : "SHA512"},
                        {"checksumValue", std::string(hex)}};
}

} // namespace

std::string_view package_db_kind(std::string_view path) {
  constexpr std::string_view k_status_d = "var/lib/dpkg/status.d/";
  if (path == "var/lib/dpkg/status") {
    return "dpkg-status";
  }
  if (path.starts_with(k_status_d)) {
    std::string_view file = path.substr(k_status_d.size());
    // Beside each package's paragraph, distroless images keep its file list's checksums.
    bool database =
        !file.empty() && file.find('/') == std::string_view::npos && !file.ends_with(".md5sums");
    return database ? "dpkg-status.d" : "";
  }
  if (path == "lib/apk/db/installed") {
    return "apk-installed";
  }
  if (path == "etc/os-release" || path == "usr/lib/os-release") {
    return "os-release";
  }
  std::string_view base = base_name(path);
  std::string_view folder = base_name(dir_name(path));
  if ((base == "METADATA" && named_with(folder, ".dist-info")) ||
      (base == "PKG-INFO" && named_with(folder, ".egg-info")) || named_with(base, ".egg-info")) {
    return "python-metadata";
  }
  return {};
}

std::vector<Package> parse_dpkg_status(std::string_view text, std::string_view path) {
  bool status_d = path.starts_with('/') && package_db_kind(path.substr(1)) == "dpkg-status.d";
  std::vector<Package> packages;
  std::optional<std::string_view> name, status, version, arch, source, maintainer;
  auto field = [&](std::string_view key, std::string_view value) {
    std::string key_lower = lower(key);
    if (key_lower == "package") {
      set_once(name, value);
    } else if (key_lower == "status") {
      set_once(status, value);
    } else if (key_lower == "version") {
      set_once(version, value);
    } else if (key_lower == "architecture") {
      set_once(arch, value);
    } else if (key_lower == "source") {
      set_once(source, value);
    } else if (key_lower == "maintainer") {
      set_once(maintainer, value);
    }
  };
  auto end = [&]() {
    // `want flag status`: only a package whose files are all in place is installed, not one
    // removed but for its conffiles (`deinstall ok config-files`) nor one half unpacked.
    bool installed = status ? word_at(*status, 2) == "installed" : status_d;
    if (name && !name->empty() && installed) {
      std::string_view source_name = source.value_or("");
      source_name = trim(source_name.substr(0, source_name.find_first_of(" \t(")));
      packages.push_back({"deb", std::string(*name), std::string(version.value_or("")),
                          std::string(arch.value_or("")), std::string(source_name),
                          std::string(maintainer.value_or("")), "", std::string(path)});
    }
    name = status = version = arch = source = maintainer = std::nullopt;
  };
  each_field(
      text, field, [](std::string_view) {}, end);
  return packages;
}

std::vector<Package> parse_apk_installed(std::string_view text, std::string_view path) {
  std::vector<Package> packages;
  std::optional<std::string_view> name, version, arch, license, origin, maintainer;
  auto end = [&]() {
    if (name && !name->empty()) {
      packages.push_back({"apk", std::string(*name), std::string(version.value_or("")),
                          std::string(arch.value_or("")), std::string(origin.value_or("")),
                          std::string(maintainer.value_or("")), std::string(license.value_or("")),
                          std::string(path)});
    }
    name = version = arch = license = origin = maintainer = std::nullopt;
  };
  each_line(text, [&](std::string_view line) {
    if (trim(line).empty()) {
      end();
      return;
    }
    if (line.size() < 2 || line[1] != ':') {
      return;
    }
    std::string_view value = trim(line.substr(2));
    switch (line[0]) {
    case 'P':
      set_once(name, value);
      break;
    case 'V':
      set_once(version, value);
      break;
    case 'A':
      set_once(arch, value);
      break;
    case 'L':
      set_once(license, value);
      break;
    case 'o':
      set_once(origin, value);
      break;
    case 'm':
      set_once(maintainer, value);
      break;
    default:
      break;
    }
  });
  end();
  return packages;
}

std::optional<Package> parse_python_metadata(std::string_view text, std::string_view path) {
  std::string name, version, license, license_expression, author, author_email;
  std::string* current = nullptr;
  bool headers = true;
  auto field = [&](std::string_view key, std::string_view value) {
    if (!headers) {
      return;
    }
    std::string key_lower = lower(key);
    std::string* slot = key_lower == "name"                 ? &name
                        : key_lower == "version"            ? &version
                        : key_lower == "license"            ? &license
                        : key_lower == "license-expression" ? &license_expression
                        : key_lower == "author"             ? &author
                        : key_lower == "author-email"       ? &author_email
                                                            : nullptr;
    current = slot != nullptr && slot->empty() ? slot : nullptr;
    if (current != nullptr) {
      *current = value;
    }
  };
  // A folded header (a License with its whole text) goes on in lines that start with blanks.
  auto more = [&](std::string_view line) {
    if (headers && current != nullptr) {
      *current += "\n" + std::string(trim(line));
    }
  };
  // The headers end at the first blank line; the description that follows may say `Name:`.
  each_field(text, field, more, [&]() { headers = false; });
  name = known(name);
  if (name.empty()) {
    return std::nullopt;
  }
  std::string email = known(author_email);
  std::string person = known(author);
  // `Author: Kirill Simonov` and `Author-email: xi@resolvent.net` name one person.
  std::string supplier = email.empty() ? person : email;
  if (!email.empty() && !person.empty() && email.find('<') == std::string::npos) {
    supplier = person + " <" + email + ">";
  }
  Package package;
  package.ecosystem = "python";
  package.name = name;
  package.version = known(version);
  package.supplier = supplier;
  package.license = known(license_expression);
  if (package.license.empty()) {
    package.license = known(license);
  }
  package.path = path;
  return package;
}

OsRelease parse_os_release(std::string_view text) {
  OsRelease os;
  each_line(text, [&](std::string_view line) {
    line = trim(line);
    std::size_t eq = line.find('=');
    if (line.empty() || line.front() == '#' || eq == std::string_view::npos) {
      return;
    }
    std::string_view key = trim(line.substr(0, eq));
    std::string_view raw = trim(line.substr(eq + 1));
    std::string value;
    if (!raw.empty() && (raw.front() == '"' || raw.front() == '\'')) {
      char quote = raw.front();
      for (std::size_t at = 1; at < raw.size() && raw[at] != quote; ++at) {
        if (quote == '"' && raw[at] == '\\' && at + 1 < raw.size()) {
          ++at;
        }
        value += raw[at];
      }
    } else {
      value = raw;
    }
    if (key == "ID") {
      os.id = value;
    } else if (key == "VERSION_ID") {
      os.version_id = value;
    } else if (key == "PRETTY_NAME") {
      os.pretty_name = value;
    }
  });
  return os;
}

std::vector<Package> read_package_db(std::string_view path, std::string_view text) {
  std::string_view kind = package_db_kind(path);
  std::string absolute = "/" + std::string(path);
  if (kind == "dpkg-status" || kind == "dpkg-status.d") {
    return parse_dpkg_status(text, absolute);
  }
  if (kind == "apk-installed") {
    return parse_apk_installed(text, absolute);
  }
  if (kind == "python-metadata") {
    if (auto package = parse_python_metadata(text, absolute)) {
      return {std::move(*package)};
    }
  }
  return {};
}

std::string package_url(const Package& package, const OsRelease& os) {
  if (package.ecosystem == "python") {
    return purl("pypi", "", pep503_name(package.name), package.version, {});
  }
  if (package.ecosystem == "deb" || package.ecosystem == "apk") {
    std::string vendor =
        lower(os.id.empty() ? (package.ecosystem == "deb" ? "debian" : "alpine") : os.id);
    std::string distro =
        os.id.empty() || os.version_id.empty() ? "" : lower(os.id) + "-" + os.version_id;
    return purl(package.ecosystem, vendor, lower(package.name), package.version,
                {{"arch", package.arch}, {"distro", distro}});
  }
  return purl("generic", "", package.name, package.version, {});
}

nlohmann::json spdx_document(const SbomSubject& subject, const std::vector<Package>& packages,
                             const OsRelease& os, const std::string& created,
                             const std::string& kiln_version) {
  std::vector<const Package*> sorted;
  sorted.reserve(packages.size());
  for (const Package& package : packages) {
    sorted.push_back(&package);
  }
  auto key = [](const Package* p) {
    return std::tie(p->ecosystem, p->name, p->version, p->arch, p->path, p->source, p->supplier,
                    p->license);
  };
  std::sort(sorted.begin(), sorted.end(),
            [&](const Package* a, const Package* b) { return key(a) < key(b); });

  UniqueIds ids;
  const std::string document_id = ids.take("SPDXRef-DOCUMENT");
  const std::string image_id = ids.take("SPDXRef-Image");
  DeclaredLicenses licenses(ids);

  std::string image_name = utf8(subject.name.empty() ? subject.digest : subject.name);
  nlohmann::json image = {
      {"SPDXID", image_id},
      {"name", image_name},
      {"downloadLocation", "NOASSERTION"},
      {"filesAnalyzed", false},
      {"supplier", "NOASSERTION"},
      {"licenseDeclared", "NOASSERTION"},
      {"primaryPackagePurpose", "CONTAINER"},
      {"externalRefs",
       {{{"referenceCategory", "PACKAGE-MANAGER"},
         {"referenceType", "purl"},
         {"referenceLocator", image_url(subject)}}}},
  };
  if (!subject.digest.empty()) {
    image["versionInfo"] = utf8(subject.digest);
  }
  if (auto checksum = digest_checksum(subject.digest)) {
    image["checksums"] = nlohmann::json::array({*checksum});
  }
  nlohmann::json spdx_packages = nlohmann::json::array({image});
  nlohmann::json relationships = nlohmann::json::array({{{"spdxElementId", document_id},
                                                         {"relationshipType", "DESCRIBES"},
                                                         {"relatedSpdxElement", image_id}}});

  std::set<std::tuple<std::string, std::string, std::string, std::string, std::string>> installs;
  for (const Package* package : sorted) {
    if (!installs
             .emplace(package->ecosystem, install_name(*package), package->version, package->arch,
                      install_place(*package))
             .second) {
      continue;
    }
    std::string base =
        "SPDXRef-Package-" + id_part(package->ecosystem) + "-" + id_part(package->name);
    for (const std::string* part : {&package->version, &package->arch}) {
      if (!part->empty()) {
        base += "-" + id_part(*part);
      }
    }
    std::string id = ids.take(base);
    std::string origin = fmt::format("read from {}", package->path);
    if (!package->source.empty()) {
      origin += fmt::format("; source package {}", package->source);
    }
    nlohmann::json entry = {
        {"SPDXID", id},
        {"name", utf8(package->name)},
        {"downloadLocation", "NOASSERTION"},
        {"filesAnalyzed", false},
        {"supplier", spdx_actor(package->supplier)},
        {"licenseDeclared", licenses.declare(package->license)},
        {"sourceInfo", utf8(origin)},
        {"externalRefs",
         {{{"referenceCategory", "PACKAGE-MANAGER"},
           {"referenceType", "purl"},
           {"referenceLocator", package_url(*package, os)}}}},
    };
    if (!package->version.empty()) {
      entry["versionInfo"] = utf8(package->version);
    }
    spdx_packages.push_back(std::move(entry));
    relationships.push_back({{"spdxElementId", image_id},
                             {"relationshipType", "CONTAINS"},
                             {"relatedSpdxElement", id}});
  }

  // The namespace names the image by its digest and platform, not its tag: a tag moves.
  std::string space = "https://kiln.dev/spdx/" + purl_encode(subject.digest);
  for (const std::string& part : split(subject.platform, '/')) {
    if (!part.empty()) {
      space += "/" + purl_encode(part);
    }
  }
  nlohmann::json document = {
      {"spdxVersion", "SPDX-2.3"},
      {"dataLicense", "CC0-1.0"},
      {"SPDXID", document_id},
      {"name", image_name},
      {"documentNamespace", space},
      {"creationInfo",
       {{"created", utf8(created)}, {"creators", {utf8("Tool: kiln-" + kiln_version)}}}},
      {"packages", std::move(spdx_packages)},
      {"relationships", std::move(relationships)},
  };
  if (!licenses.infos().empty()) {
    document["hasExtractedLicensingInfos"] = licenses.infos();
  }
  return document;
}

} // namespace kiln
