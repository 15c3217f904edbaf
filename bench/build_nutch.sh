#!/usr/bin/env bash
# Build Apache Nutch 1.22 (local runtime) for bench/cost.py's `nutch` method, outside the repo.
#
#   bench/build_nutch.sh [--git-dir DIR] [--build-dir /work/.nutch-build]
#
# Why from source: Maven Central has only Nutch's core jar (org.apache.nutch:nutch:1.22, no
# plugins, no runtime), and a crawl needs the plugins. The source comes from a git clone or mirror
# of github.com/apache/nutch (tag release-1.22; DIR may be a bare repo) -- default: $NUTCH_GIT_DIR,
# else /work/.mirror/apache+nutch/repo. Everything else comes from Maven Central only:
#   * Ant 1.10.15, ant-launcher and Ivy 2.5.3 jars (mvn dependency:copy; Ant is run from them);
#   * every Nutch dependency, by Ivy, whose resolver chain is cut to the local caches + Maven
#     Central (the release's chain also asks repository.apache.org snapshots and oss.sonatype.org);
#   * protocol-okhttp is left out of the plugin build: it needs okhttp-zstd, which is not served.
#     The bench fetches with protocol-http;
#   * by default only the plugins the bench configures are built (protocol-http, parse-html,
#     urlfilter-regex, scoring-opic, urlnormalizer-{pass,regex,basic} and the libraries they
#     import): the others (Selenium, HtmlUnit, Tika, the indexers' clients) are hundreds of MB of
#     downloads. --all-plugins builds every plugin but protocol-okhttp.
# Result: BUILD_DIR/runtime/local (bin/nutch, conf, lib, plugins). Needs JDK >= 11 and Maven.
# About 4 minutes on 2 cores with a cold Ivy cache (BUILD_DIR/ivy-home), mostly downloads; 30 s warm.
set -euo pipefail

GIT_DIR=${NUTCH_GIT_DIR:-/work/.mirror/apache+nutch/repo}
BUILD_DIR=/work/.nutch-build
TAG=release-1.22
ALL_PLUGINS=0
while [ $# -gt 0 ]; do
  case "$1" in
    --git-dir) GIT_DIR=$2; shift 2 ;;
    --build-dir) BUILD_DIR=$2; shift 2 ;;
    --all-plugins) ALL_PLUGINS=1; shift ;;
    *) echo "usage: $0 [--git-dir DIR] [--build-dir DIR] [--all-plugins]" >&2; exit 2 ;;
  esac
done
ANT_VERSION=1.10.15
IVY_VERSION=2.5.3
: "${JAVA_HOME:=$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")}"
export JAVA_HOME

git --git-dir="$GIT_DIR" rev-parse --verify -q "$TAG^{commit}" >/dev/null || {
  echo "no $TAG in $GIT_DIR: clone https://github.com/apache/nutch (or pass --git-dir)" >&2; exit 1; }

SRC=$BUILD_DIR/src
TOOLS=$BUILD_DIR/ant
mkdir -p "$BUILD_DIR" "$TOOLS"
rm -rf "$SRC" && mkdir -p "$SRC"
git --git-dir="$GIT_DIR" archive "$TAG" | tar -x -C "$SRC"

for a in org.apache.ant:ant:$ANT_VERSION org.apache.ant:ant-launcher:$ANT_VERSION org.apache.ivy:ivy:$IVY_VERSION; do
  mvn -q dependency:copy -Dartifact="$a" -DoutputDirectory="$TOOLS"
done
cp "$TOOLS/ivy-$IVY_VERSION.jar" "$SRC/ivy/ivy-$IVY_VERSION.jar"   # no ivy-download

# protocol-okhttp out of the plugin build (deploy, test, clean)
sed -i '/<ant dir="protocol-okhttp"/d' "$SRC/src/plugin/build.xml"
if [ "$ALL_PLUGINS" = 0 ]; then
  # only the plugins bench/cost.py's plugin.includes names, and what they import: the others
  # (Selenium, HtmlUnit, Tika, the indexers' clients...) are hundreds of MB of dependencies
  python3 - "$SRC/src/plugin/build.xml" <<'EOF'
import re, sys
keep = {"nutch-extensionpoints", "lib-http", "lib-nekohtml", "lib-regex-filter", "protocol-http", "parse-html",
        "urlfilter-regex", "scoring-opic", "urlnormalizer-pass", "urlnormalizer-regex", "urlnormalizer-basic"}
p = sys.argv[1]
s = open(p, encoding="utf-8").read()
start = s.index('<target name="deploy">')
end = s.index("</target>", start)
body = re.sub(r'\s*<ant dir="([^"]+)"\s+target="deploy"\s*/>', lambda m: m[0] if m[1] in keep else "", s[start:end])
assert len(re.findall(r'<ant dir="', body)) == len(keep), body
open(p, "w", encoding="utf-8").write(s[:start] + body + s[end:])
EOF
fi
# Ivy's default chain: local caches and Maven Central only
python3 - "$SRC/ivy/ivysettings.xml" <<'EOF'
import re, sys
p = sys.argv[1]
s = open(p, encoding="utf-8").read()
s, n = re.subn(r'(<chain name="default"[^>]*>)(.*?)(</chain>)',
               r'\1\n      <resolver ref="local"/>\n      <resolver ref="local-maven-2"/>\n      <resolver ref="maven2"/>\n    \3',
               s, count=1, flags=re.S)
assert n == 1, "no default chain in ivysettings.xml"
open(p, "w", encoding="utf-8").write(s)
EOF

cd "$SRC"
java -cp "$TOOLS/ant-$ANT_VERSION.jar:$TOOLS/ant-launcher-$ANT_VERSION.jar:$TOOLS/ivy-$IVY_VERSION.jar" \
  org.apache.tools.ant.Main -noinput -Divy.default.ivy.user.dir="$BUILD_DIR/ivy-home" runtime
rm -rf "$BUILD_DIR/runtime"
mv "$SRC/runtime" "$BUILD_DIR/runtime"
ls "$BUILD_DIR/runtime/local/plugins" | grep -qx protocol-http
! ls "$BUILD_DIR/runtime/local/plugins" | grep -qx protocol-okhttp
echo "Nutch 1.22 runtime: $BUILD_DIR/runtime/local (bench/cost.py --nutch-home, its default)"
