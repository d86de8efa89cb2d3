// Writes COUNT realistic, varied Dockerfiles (20 to 150 lines each) into OUTDIR, the same
// bytes for the same SEED on every host: the lint throughput benchmark and the parser
// differential run over them. They mix what real build files carry: parser directives, global
// ARGs, multi-stage builds, both ENV forms, shell and JSON forms, continuations with comments
// inside, cache and bind mounts, COPY --from, heredocs, LABEL, HEALTHCHECK, ONBUILD, and now
// and then a build-host leak or an out-of-scope ARG, so linters have something to find.
//
// Usage: kiln_bench_dockerfile_corpus OUTDIR COUNT [SEED]
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace {

namespace fs = std::filesystem;

// splitmix64: tiny and fully specified, unlike the standard distributions.
class Rng {
public:
  explicit Rng(std::uint64_t seed) : m_state(seed) {}

  std::uint64_t next() {
    std::uint64_t z = (m_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
  int between(int lo, int hi) { return lo + below(hi - lo + 1); }
  bool chance(int percent) { return below(100) < percent; }
  template <typename T> const T& pick(const std::vector<T>& items) {
    return items[static_cast<std::size_t>(below(static_cast<int>(items.size())))];
  }

private:
  std::uint64_t m_state;
};

struct Stack {
  std::string base;
  std::string runtime;
  std::vector<std::string> packages;
  std::string build;
  std::string cache_target;
  std::string artifact;
};

const std::vector<Stack> k_stacks = {
    {"golang:1.22-bookworm",
     "gcr.io/distroless/static-debian12",
     {"git", "make", "ca-certificates"},
     "go build -trimpath -ldflags=\"-s -w\" -o /out/app ./cmd/app",
     "/root/.cache/go-build",
     "/out/app"},
    {"rust:1.77-slim-bookworm",
     "debian:12-slim",
     {"pkg-config", "libssl-dev", "clang", "mold"},
     "cargo build --release --locked",
     "/root/.cache/sccache",
     "/src/target/release/app"},
    {"debian:12",
     "debian:12-slim",
     {"build-essential", "cmake", "ninja-build", "ccache", "libboost-dev", "libfmt-dev"},
     "cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build",
     "/root/.ccache",
     "/src/build/app"},
    {"python:3.12-slim",
     "python:3.12-slim",
     {"gcc", "libpq-dev", "curl"},
     "pip wheel --wheel-dir /wheels -r requirements.txt",
     "/root/.cache/pip",
     "/wheels"},
    {"node:20-bookworm",
     "node:20-slim",
     {"python3", "g++", "make"},
     "npm ci && npm run build",
     "/root/.npm",
     "/src/dist"},
    {"eclipse-temurin:21-jdk",
     "eclipse-temurin:21-jre",
     {"unzip", "curl"},
     "./gradlew --no-daemon build -x test",
     "/root/.gradle",
     "/src/build/libs/app.jar"},
    {"ubuntu:22.04",
     "ubuntu:22.04",
     {"build-essential", "cmake", "libssl-dev", "zlib1g-dev", "pkg-config"},
     "cmake -S . -B build && cmake --build build -j\"$(nproc)\"",
     "/var/cache/sccache",
     "/src/build/bin/app"},
};

const std::vector<std::string> k_comments = {
    "# Install the toolchain first so the layer is shared between branches",
    "# Dependencies change less often than the sources",
    "# TODO: pin the base image by digest",
    "# Keep the runtime image small",
    "# Build",
    "# Runtime stage",
    "#   cache mounts keep compiler caches out of the image",
    "# See docs/build.md for the flags",
    "#",
    "# shellcheck disable=SC2086",
};

const std::vector<std::string> k_leaks = {
    "ENV SCCACHE_WEBDAV_ENDPOINT=http://192.168.1.5:8080",
    "ENV SCCACHE_REDIS=redis://10.0.3.7:6379",
    "ENV HTTP_PROXY=http://172.16.0.10:3128",
    "ENV PIP_INDEX_URL=http://192.168.10.20:3141/root/pypi/+simple/",
    "ENV SCCACHE_BUCKET=build-cache SCCACHE_REGION=eu-west-1",
    "ENV CCACHE_REMOTE_STORAGE=http://10.8.0.2:8080/ccache",
    "ENV AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE",
};

class Writer {
public:
  Writer(Rng& rng, char escape) : m_rng(rng), m_esc(escape) {}

  std::vector<std::string>& lines() { return m_lines; }
  void add(std::string line) { m_lines.push_back(std::move(line)); }
  std::size_t size() const { return m_lines.size(); }

  // A logical line written over several physical ones, sometimes with a comment line or an
  // empty line inside, as people do (BuildKit skips both).
  void continued(const std::string& head, const std::vector<std::string>& parts,
                 const std::string& indent = "    ") {
    std::string line = head;
    for (const auto& part : parts) {
      add(line + " " + m_esc);
      if (m_rng.chance(4)) {
        add(indent + m_rng.pick(k_comments));
      } else if (m_rng.chance(1)) {
        add(""); // an empty continuation line: BuildKit warns, still joins
      }
      line = indent + part;
    }
    add(line);
  }

  void comment() { add(m_rng.pick(k_comments)); }
  void blank() { add(""); }
  char escape() const { return m_esc; }

private:
  Rng& m_rng;
  char m_esc;
  std::vector<std::string> m_lines;
};

std::string kw(Rng& rng, const char* upper) {
  std::string word(upper);
  if (rng.chance(3)) {
    for (auto& c : word) {
      c = static_cast<char>(c - 'A' + 'a');
    }
  }
  return word;
}

void apt_install(Writer& w, Rng& rng, const Stack& stack) {
  std::vector<std::string> parts{"&& apt-get install -y --no-install-recommends"};
  for (const auto& p : stack.packages) {
    parts.push_back("  " + p);
  }
  parts.push_back("&& rm -rf /var/lib/apt/lists/*");
  if (rng.chance(30)) {
    w.add(kw(rng, "RUN") + " --mount=type=cache,target=/var/cache/apt,sharing=locked " +
          w.escape());
    w.continued("    apt-get update", parts);
  } else {
    w.continued(kw(rng, "RUN") + " apt-get update", parts);
  }
}

void heredoc(Writer& w, Rng& rng, const Stack& stack) {
  switch (rng.below(5)) {
  case 0:
    w.add(kw(rng, "RUN") + " <<EOF");
    w.add("set -eux");
    w.add("echo \"building $HOME\"");
    w.add(stack.build);
    w.add("EOF");
    break;
  case 1:
    w.add(kw(rng, "RUN") + " <<-EOT bash");
    w.add("\tset -e");
    w.add("\tfor f in /etc/*.conf; do echo \"$f\"; done");
    w.add("\tEOT");
    break;
  case 2:
    w.add(kw(rng, "COPY") + " <<EOF /etc/app/config.toml");
    w.add("[server]");
    w.add("port = 8080");
    w.add("log = \"info\"");
    w.add("EOF");
    break;
  case 3:
    w.add(kw(rng, "RUN") + " <<'EOF'");
    w.add("echo '$NOT_EXPANDED' > /etc/motd");
    w.add("EOF");
    break;
  default:
    w.add(kw(rng, "RUN") + " python3 <<PY");
    w.add("import sys");
    w.add("print(sys.version)");
    w.add("PY");
    break;
  }
}

void env(Writer& w, Rng& rng, const std::string& stage_arg) {
  switch (rng.below(6)) {
  case 0:
    w.add(kw(rng, "ENV") + " LANG C.UTF-8");
    break;
  case 1:
    w.add(kw(rng, "ENV") + " PATH=/usr/local/bin:$PATH LC_ALL=C.UTF-8");
    break;
  case 2:
    w.continued(kw(rng, "ENV") + " APP_HOME=/app",
                {"APP_USER=\"app user\"", "APP_VERSION=${" + stage_arg + ":-dev}"});
    break;
  case 3:
    w.add(kw(rng, "ENV") + " DEBIAN_FRONTEND=noninteractive");
    break;
  case 4:
    w.add(kw(rng, "ENV") + " RUSTC_WRAPPER=sccache SCCACHE_DIR=/root/.cache/sccache");
    break;
  default:
    w.add(kw(rng, "ENV") + " NODE_ENV production");
    break;
  }
}

void label(Writer& w, Rng& rng) {
  if (rng.chance(50)) {
    w.continued(kw(rng, "LABEL") +
                    " org.opencontainers.image.source=\"https://example.com/acme/app\"",
                {"org.opencontainers.image.version=\"${VERSION}\"",
                 "org.opencontainers.image.description=\"An example service\""},
                "      ");
  } else {
    w.add(kw(rng, "LABEL") + " maintainer=\"ops@example.com\" tier=backend");
  }
}

void copy(Writer& w, Rng& rng, const std::string& from) {
  switch (rng.below(6)) {
  case 0:
    w.add(kw(rng, "COPY") + " --link go.mod go.sum ./");
    break;
  case 1:
    w.add(kw(rng, "COPY") + " --chown=app:app . .");
    break;
  case 2:
    w.add(kw(rng, "COPY") + " [\"config/app settings.json\", \"/etc/app/\"]");
    break;
  case 3:
    w.add(kw(rng, "ADD") + " --chmod=644 https://example.com/archive/v1.2.3.tar.gz /tmp/");
    break;
  case 4:
    if (!from.empty()) {
      w.add(kw(rng, "COPY") + " --from=" + from + " /etc/ssl/certs /etc/ssl/certs");
      break;
    }
    [[fallthrough]];
  default:
    w.add(kw(rng, "COPY") + " src/ ./src/");
    break;
  }
}

void run_step(Writer& w, Rng& rng, const Stack& stack, int step) {
  switch (rng.below(8)) {
  case 0:
    w.add(kw(rng, "RUN") + " [\"/bin/sh\", \"-c\", \"echo step " + std::to_string(step) +
          " > /tmp/step\"]");
    break;
  case 1:
    w.continued(kw(rng, "RUN") + " set -eux;",
                {"mkdir -p /opt/app/" + std::to_string(step) + ";",
                 "chmod 0755 /opt/app/" + std::to_string(step) + ";", "ls -la /opt/app"});
    break;
  case 2:
    w.add(kw(rng, "RUN") + " --mount=type=cache,target=" + stack.cache_target + " " + stack.build);
    break;
  case 3:
    w.add(kw(rng, "RUN") + " --mount=type=bind,source=scripts,target=/scripts " +
          "--mount=type=secret,id=token sh /scripts/step" + std::to_string(step) + ".sh");
    break;
  case 4:
    w.add(kw(rng, "RUN") + " useradd --uid 1000 --create-home app || true");
    break;
  case 5:
    w.continued(kw(rng, "RUN") + " curl -fsSL https://example.com/install.sh -o /tmp/i.sh",
                {"&& sh /tmp/i.sh --prefix=/usr/local", "&& rm -f /tmp/i.sh"}, "\t");
    break;
  case 6:
    w.add(kw(rng, "RUN") + " echo 'step " + std::to_string(step) + "' && test -d /tmp");
    break;
  default:
    w.add(kw(rng, "WORKDIR") + " /opt/app/" + std::to_string(step));
    break;
  }
}

std::string generate(Rng& rng) {
  char escape = rng.chance(3) ? '`' : '\\';
  Writer w(rng, escape);
  const Stack& stack = rng.pick(k_stacks);
  int target = rng.between(20, 150);

  if (rng.chance(40)) {
    w.add("# syntax=docker/dockerfile:1");
  }
  if (escape == '`') {
    w.add("# escape=`");
  }
  w.comment();
  std::string base_arg = "BASE_IMAGE";
  bool global_base = rng.chance(50);
  if (global_base) {
    w.add(kw(rng, "ARG") + " " + base_arg + "=" + stack.base);
  }
  if (rng.chance(40)) {
    w.add(kw(rng, "ARG") + " VERSION=1." + std::to_string(rng.below(20)) + ".0");
  }
  if (rng.chance(25)) {
    w.add(kw(rng, "ARG") + " SCCACHE_WEBDAV_ENDPOINT");
  }
  if (rng.chance(8)) {
    w.add(kw(rng, "ARG") + " CACHE_HOST=http://10.0.0.7:8080");
  }
  w.blank();

  int stages = rng.between(1, 4);
  std::vector<std::string> names;
  int step = 0;
  for (int s = 0; s < stages; ++s) {
    bool last = s == stages - 1;
    std::string name = last ? "runtime" : fmt::format("build{}", s);
    std::string image = last && stages > 1 ? stack.runtime : stack.base;
    if (global_base && s == 0) {
      image = "${" + base_arg + "}";
    } else if (!names.empty() && rng.chance(25)) {
      image = names.back();
    }
    std::string from = kw(rng, "FROM");
    if (rng.chance(15)) {
      from += " --platform=$BUILDPLATFORM";
    }
    if (rng.chance(10)) {
      w.add(from + " " + image);
    } else {
      w.add(from + " " + image + (rng.chance(10) ? " as " : " AS ") + name);
    }
    if (rng.chance(50)) {
      w.add(kw(rng, "ARG") + " VERSION");
    }
    if (rng.chance(20)) {
      w.add(kw(rng, "ARG") + " UID=1000 GID=1000");
    }
    if (rng.chance(10)) {
      w.add(kw(rng, "ARG") + " TARGETARCH");
    } else if (rng.chance(8)) {
      w.add(kw(rng, "ARG") + " TARGETOS TARGETARCH");
    }
    w.add(kw(rng, "WORKDIR") + " /src");
    if (!last || stages == 1) {
      apt_install(w, rng, stack);
    }
    if (rng.chance(10)) {
      w.add(rng.pick(k_leaks));
    }
    // Fill this stage's share of the target size.
    std::size_t goal =
        w.size() +
        static_cast<std::size_t>(std::max(
            4, (target - static_cast<int>(w.size())) / std::max(1, stages - s) - (last ? 6 : 0)));
    while (w.size() < goal) {
      int what = rng.below(100);
      if (what < 8) {
        w.comment();
      } else if (what < 12) {
        w.blank();
      } else if (what < 20) {
        env(w, rng, "VERSION");
      } else if (what < 30) {
        copy(w, rng,
             names.empty()
                 ? ""
                 : names[static_cast<std::size_t>(rng.below(static_cast<int>(names.size())))]);
      } else if (what < 37) {
        heredoc(w, rng, stack);
      } else if (what < 40) {
        label(w, rng);
      } else if (what < 42) {
        w.add(rng.pick(k_leaks));
      } else if (what < 44) {
        w.add(kw(rng, "RUN") + " echo \"release ${VERSION} for ${TARGETARCH:-amd64}\"");
      } else if (what < 46) {
        w.add(kw(rng, "SHELL") + " [\"/bin/bash\", \"-o\", \"pipefail\", \"-c\"]");
      } else if (what < 47) {
        w.add(kw(rng, "ONBUILD") + " COPY . /app/src");
      } else {
        run_step(w, rng, stack, ++step);
      }
    }
    if (last) {
      if (stages > 1) {
        w.add(kw(rng, "COPY") + " --from=" + names.back() + " " + stack.artifact + " /app/");
      }
      if (rng.chance(50)) {
        w.add(kw(rng, "USER") + (rng.chance(50) ? " app" : " 1000:1000"));
      }
      w.add(kw(rng, "EXPOSE") + (rng.chance(50) ? " 8080" : " 80/tcp 443/tcp"));
      if (rng.chance(30)) {
        w.add(kw(rng, "VOLUME") + (rng.chance(50) ? " [\"/data\"]" : " /var/lib/app"));
      }
      if (rng.chance(30)) {
        w.continued(kw(rng, "HEALTHCHECK") + " --interval=30s --timeout=3s",
                    {"CMD curl -f http://localhost:8080/health || exit 1"});
      }
      if (rng.chance(20)) {
        w.add(kw(rng, "STOPSIGNAL") + " SIGTERM");
      }
      if (rng.chance(60)) {
        w.add(kw(rng, "ENTRYPOINT") + " [\"/app/app\"]");
        w.add(kw(rng, "CMD") + " [\"--port\", \"8080\", \"--log-level=info\"]");
      } else {
        w.add(kw(rng, "CMD") + " /app/app --port 8080");
      }
    } else {
      w.blank();
    }
    names.push_back(name);
  }

  if (w.size() < 20 || w.size() > 150) {
    return {};
  }
  std::string eol = rng.chance(2) ? "\r\n" : "\n";
  std::string out;
  for (const auto& line : w.lines()) {
    out += line;
    out += eol;
  }
  return out;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: %s OUTDIR COUNT [SEED]\n", argv[0]);
    return 2;
  }
  fs::path out = argv[1];
  int count = std::stoi(argv[2]);
  std::uint64_t seed = argc == 4 ? std::stoull(argv[3]) : 1;
  fs::create_directories(out);
  for (int i = 0; i < count; ++i) {
    std::ofstream file(out / fmt::format("df-{:05}.Dockerfile", i), std::ios::binary);
    // Each file from its own stream, so a file is the same whatever COUNT is; the rare draw
    // that lands outside 20 to 150 lines is drawn again.
    Rng rng(seed * 1000003ULL + static_cast<std::uint64_t>(i));
    std::string text;
    while (text.empty()) {
      text = generate(rng);
    }
    file << text;
    if (!file) {
      std::fprintf(stderr, "cannot write into %s\n", out.c_str());
      return 1;
    }
  }
  return 0;
}
