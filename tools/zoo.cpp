// crema zoo list | info NAME | fetch NAME: the model zoo under models/. Each model folder holds
// deploy/train_val/solver prototxts and a readme.md whose YAML front matter (between two `---`
// lines) names the weights (weights_url, the checksums sha256 / sha1 / md5 / sha256_prefix as
// published), license, accuracy and preprocessing. fetch downloads the weights with libcurl
// (http, https, file) into NAME/<file>.part, resumes a partial .part with a Range request,
// checks the published checksum (OpenSSL EVP) and renames the file into place only when it
// matches.
#include <curl/curl.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "crema/error.hpp"
#include "flags.hpp"
#include "verb.hpp"

DEFINE_string(models_dir, "models", "The model zoo folder: one sub-folder per model.");
DEFINE_string(url_base, "",
              "fetch: download from this folder instead of the published one (a mirror): the "
              "weights URL's folder is replaced, its file name kept. http://, https:// or "
              "file:// (or a local folder).");
DEFINE_bool(allow_unverified, false,
            "fetch: keep weights whose publisher gives no checksum (the sha256 of the file is "
            "printed); without it such a fetch is refused.");

namespace crema::cli {
namespace {

namespace fs = std::filesystem;

// The front matter: keys in file order; a key with an empty value followed by indented
// `sub: value` lines gives "key.sub" entries.
struct FrontMatter {
  std::string path;
  std::vector<std::pair<std::string, std::string>> entries;

  bool Has(const std::string& key) const { return Index(key) >= 0; }
  std::string Get(const std::string& key) const {
    const int i = Index(key);
    return i < 0 ? "" : entries[i].second;
  }
  int Index(const std::string& key) const {
    for (size_t i = 0; i < entries.size(); ++i)
      if (entries[i].first == key) return static_cast<int>(i);
    return -1;
  }
};

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::string Unquote(const std::string& v) {
  if (v.size() >= 2 &&
      ((v.front() == '"' && v.back() == '"') || (v.front() == '\'' && v.back() == '\'')))
    return v.substr(1, v.size() - 2);
  return v;
}

const char* const kRequiredKeys[] = {"name",
                                     "weights_url",
                                     "sha256",
                                     "license",
                                     "accuracy",
                                     "preprocessing.mean",
                                     "preprocessing.scale",
                                     "preprocessing.channel_order",
                                     "preprocessing.input_size",
                                     "preprocessing.crop"};

FrontMatter ReadFrontMatter(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw RuntimeError(StrCat(path, ": cannot read the model's readme"));
  FrontMatter fm;
  fm.path = path;
  std::string line, parent;
  int line_no = 0;
  bool open = false, closed = false;
  while (std::getline(in, line)) {
    ++line_no;
    if (!open) {
      if (Trim(line).empty()) continue;
      if (Trim(line) != "---")
        throw ConfigError(StrCat(path, ":", line_no,
                                 ": the readme must start with YAML front matter (a `---` line)"));
      open = true;
      continue;
    }
    if (Trim(line) == "---") {
      closed = true;
      break;
    }
    const std::string body = Trim(line);
    if (body.empty() || body[0] == '#') continue;
    const size_t colon = body.find(':');
    if (colon == std::string::npos || colon == 0)
      throw ConfigError(StrCat(path, ":", line_no, ": expected `key: value`, got \"", body, "\""));
    const std::string key = Trim(body.substr(0, colon));
    const std::string value = Unquote(Trim(body.substr(colon + 1)));
    const bool indented = std::isspace(static_cast<unsigned char>(line[0])) != 0;
    if (indented && parent.empty())
      throw ConfigError(StrCat(path, ":", line_no, ": indented key \"", key,
                               "\" outside a mapping (the line above it must be `key:`)"));
    const std::string full = indented ? parent + "." + key : key;
    if (fm.Has(full))
      throw ConfigError(StrCat(path, ":", line_no, ": key \"", full, "\" given twice"));
    fm.entries.emplace_back(full, value);
    if (!indented) parent = value.empty() ? key : "";
  }
  if (!open) throw ConfigError(StrCat(path, ": no YAML front matter (`---` ... `---`)"));
  if (!closed) throw ConfigError(StrCat(path, ": the front matter has no closing `---` line"));
  for (const char* key : kRequiredKeys)
    if (!fm.Has(key)) throw ConfigError(StrCat(path, ": front matter lacks \"", key, "\""));
  return fm;
}

std::string ModelDir(const std::string& name) { return FLAGS_models_dir + "/" + name; }

std::vector<std::string> ModelNames() {
  std::vector<std::string> names;
  std::error_code ec;
  if (!fs::is_directory(FLAGS_models_dir, ec))
    throw RuntimeError(StrCat("no model zoo folder \"", FLAGS_models_dir,
                              "\" (run from the checkout's root or give --models-dir)"));
  for (const auto& entry : fs::directory_iterator(FLAGS_models_dir))
    if (entry.is_directory() && fs::exists(entry.path() / "readme.md"))
      names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

FrontMatter LoadModel(const std::string& name) {
  const std::string readme = ModelDir(name) + "/readme.md";
  if (!fs::exists(readme)) {
    std::string known;
    for (const std::string& n : ModelNames()) known += (known.empty() ? "" : ", ") + n;
    throw ConfigError(
        StrCat("unknown model \"", name, "\" in ", FLAGS_models_dir, " (known: ", known, ")"));
  }
  return ReadFrontMatter(readme);
}

std::string NameArgument(const std::vector<std::string>& args, const char* sub) {
  if (args.size() != 2)
    throw ConfigError(
        StrCat("crema zoo ", sub, " takes one model name (crema zoo list shows them)"));
  return args[1];
}

int RunList() {
  struct Row {
    std::string name, size, accuracy, license;
  };
  std::vector<Row> rows;
  size_t widths[3] = {4, 4, 7};
  for (const std::string& name : ModelNames()) {
    const FrontMatter fm = ReadFrontMatter(ModelDir(name) + "/readme.md");
    Row row{name, fm.Has("size") ? fm.Get("size") : "-", fm.Get("accuracy"), fm.Get("license")};
    if (fm.Get("weights_url").empty()) row.size = "(no weights)";
    widths[0] = std::max(widths[0], row.name.size());
    widths[1] = std::max(widths[1], row.size.size());
    widths[2] = std::max(widths[2], row.license.size());
    rows.push_back(row);
  }
  const int w0 = static_cast<int>(widths[0]), w1 = static_cast<int>(widths[1]),
            w2 = static_cast<int>(widths[2]);
  std::printf("%-*s  %-*s  %-*s  %s\n", w0, "name", w1, "size", w2, "license", "accuracy");
  for (const Row& r : rows)
    std::printf("%-*s  %-*s  %-*s  %s\n", w0, r.name.c_str(), w1, r.size.c_str(), w2,
                r.license.c_str(), r.accuracy.c_str());
  return 0;
}

int RunInfo(const std::string& name) {
  const FrontMatter fm = LoadModel(name);
  std::printf("model %s (%s)\n\n", name.c_str(), fm.path.c_str());
  size_t width = 0;
  for (const auto& kv : fm.entries) width = std::max(width, kv.first.size());
  for (const auto& kv : fm.entries)
    std::printf("  %-*s  %s\n", static_cast<int>(width), kv.first.c_str(), kv.second.c_str());
  std::printf("\nfiles:\n");
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(ModelDir(name)))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files)
    std::printf("  %-40s %12llu bytes\n", f.string().c_str(),
                static_cast<unsigned long long>(fs::file_size(f)));
  return 0;
}

// ---- checksums ----

// The checksum fetch verifies: the strongest one the readme gives.
struct Checksum {
  std::string algorithm;  // OpenSSL digest name: sha256, sha1, md5
  std::string hex;        // lower case; for sha256_prefix only the leading digits
  bool prefix = false;
  std::string Describe() const { return prefix ? "sha256 starting " + hex : algorithm + " " + hex; }
};

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool ChooseChecksum(const FrontMatter& fm, Checksum* out) {
  static const struct {
    const char* key;
    const char* algorithm;
    size_t digits;  // 0: a prefix of any length >= 8
  } kKinds[] = {{"sha256", "sha256", 64},
                {"sha1", "sha1", 40},
                {"md5", "md5", 32},
                {"sha256_prefix", "sha256", 0}};
  for (const auto& kind : kKinds) {
    const std::string hex = Lower(fm.Get(kind.key));
    if (hex.empty()) continue;
    const bool valid_length =
        kind.digits ? hex.size() == kind.digits : hex.size() >= 8 && hex.size() <= 64;
    if (!valid_length || hex.find_first_not_of("0123456789abcdef") != std::string::npos)
      throw ConfigError(StrCat(fm.path, ": ", kind.key, " \"", hex, "\" is not ",
                               kind.digits ? std::to_string(kind.digits) : "8 to 64",
                               " hexadecimal digits"));
    *out = Checksum{kind.algorithm, hex, kind.digits == 0};
    return true;
  }
  return false;
}

std::string FileDigest(const std::string& path, const std::string& algorithm) {
  const EVP_MD* md = EVP_get_digestbyname(algorithm.c_str());
  if (md == nullptr) throw RuntimeError(StrCat("OpenSSL has no ", algorithm, " digest"));
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  std::ifstream in(path, std::ios::binary);
  if (!ctx || !in || EVP_DigestInit_ex(ctx.get(), md, nullptr) != 1)
    throw RuntimeError(StrCat("cannot compute the ", algorithm, " of ", path));
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    if (in.gcount() > 0)
      EVP_DigestUpdate(ctx.get(), buffer.data(), static_cast<size_t>(in.gcount()));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &length);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

bool Matches(const Checksum& want, const std::string& got) {
  return want.prefix ? got.compare(0, want.hex.size(), want.hex) == 0 : got == want.hex;
}

// ---- download ----

size_t WriteBody(char* data, size_t size, size_t count, void* file) {
  return std::fwrite(data, size, count, static_cast<FILE*>(file)) * size;
}

// URL with its folder replaced by --url-base.
std::string MirrorUrl(const std::string& url) {
  if (FLAGS_url_base.empty()) return url;
  std::string base = FLAGS_url_base;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  if (base.find("://") == std::string::npos) base = "file://" + fs::absolute(base).string();
  return base + "/" + url.substr(url.rfind('/') + 1);
}

std::string FileNameOf(const std::string& url) {
  std::string name = url.substr(url.rfind('/') + 1);
  name = name.substr(0, name.find_first_of("?#"));
  return name;
}

std::string HumanBytes(double bytes) {
  char text[32];
  if (bytes >= 1e6)
    std::snprintf(text, sizeof(text), "%.1f MB", bytes / 1e6);
  else
    std::snprintf(text, sizeof(text), "%.0f bytes", bytes);
  return text;
}

struct Attempt {
  CURLcode rc = CURLE_OK;
  long http_code = 0;
  std::string error;
};

// One transfer of `url` appended to `part`, asking for the bytes after what it holds.
Attempt TransferOnce(const std::string& url, const std::string& part, uintmax_t have) {
  FILE* file = std::fopen(part.c_str(), have > 0 ? "ab" : "wb");
  if (file == nullptr) throw RuntimeError(StrCat("cannot write ", part));
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
  char error[CURL_ERROR_SIZE] = "";
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
  // Give up on a stalled connection: under 1 byte/s for 60 s.
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, WriteBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, file);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "crema-zoo");
  if (have > 0) curl_easy_setopt(c, CURLOPT_RESUME_FROM_LARGE, static_cast<curl_off_t>(have));
  Attempt attempt;
  attempt.rc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &attempt.http_code);
  attempt.error = error[0] ? error : curl_easy_strerror(attempt.rc);
  if (std::fclose(file) != 0 && attempt.rc == CURLE_OK)
    throw RuntimeError(StrCat("writing ", part, " failed (disk full?)"));
  return attempt;
}

uintmax_t SizeOrZero(const std::string& path) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  return ec ? 0 : size;
}

// Downloads `url` into `part`, resuming what is there. Throws RuntimeError with a readable
// reason; after a network failure the .part stays for the next attempt.
void Download(const std::string& url, const std::string& part) {
  static const bool initialized = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  if (!initialized) throw RuntimeError("libcurl failed to initialise");
  uintmax_t have = SizeOrZero(part);
  if (have > 0) std::printf("resuming %s from byte %ju\n", part.c_str(), have);
  Attempt attempt = TransferOnce(url, part, have);
  if (have > 0 && attempt.rc == CURLE_RANGE_ERROR) {
    std::printf("the server cannot resume (no Range support); downloading afresh\n");
    have = 0;
    attempt = TransferOnce(url, part, 0);
  }
  // 416: nothing after byte `have`, the .part is already whole (its checksum decides).
  if (attempt.rc == CURLE_HTTP_RETURNED_ERROR && attempt.http_code == 416 && have > 0) return;
  if (attempt.rc == CURLE_OK) return;
  std::string reason = attempt.error;
  if (attempt.rc == CURLE_COULDNT_CONNECT || attempt.rc == CURLE_COULDNT_RESOLVE_HOST ||
      attempt.rc == CURLE_COULDNT_RESOLVE_PROXY || attempt.rc == CURLE_OPERATION_TIMEDOUT)
    reason += " (offline? download the file elsewhere and pass its folder with --url-base)";
  const uintmax_t now = SizeOrZero(part);
  std::string kept;
  if (now > 0) {
    kept = StrCat("; ", HumanBytes(static_cast<double>(now)), " kept in ", part,
                  ", run the same command again to resume");
  } else {
    std::error_code ec;
    fs::remove(part, ec);
  }
  throw RuntimeError(StrCat("cannot download ", url, ": ", reason, kept));
}

int RunFetch(const std::string& name) {
  const FrontMatter fm = LoadModel(name);
  const std::string published = fm.Get("weights_url");
  if (published.empty()) {
    const std::string how = fm.Has("weights") ? fm.Get("weights") : "train it from its solver";
    throw ConfigError(StrCat("model \"", name, "\" has no published weights: ", how));
  }
  Checksum checksum;
  const bool verified = ChooseChecksum(fm, &checksum);
  if (!verified && !FLAGS_allow_unverified)
    throw ConfigError(StrCat("model \"", name, "\": its publisher gives no checksum for ",
                             published,
                             ", so the download cannot be verified; add "
                             "--allow-unverified to fetch it anyway"));
  const std::string url = MirrorUrl(published);
  const std::string file = FileNameOf(published);
  if (file.empty())
    throw ConfigError(StrCat(fm.path, ": weights_url \"", published, "\" names no file"));
  const std::string target = ModelDir(name) + "/" + file;
  const std::string part = target + ".part";
  if (fs::exists(target)) {
    if (!verified) {
      std::printf("%s exists (sha256 %s, no published checksum)\n", target.c_str(),
                  FileDigest(target, "sha256").c_str());
      return 0;
    }
    const std::string got = FileDigest(target, checksum.algorithm);
    if (!Matches(checksum, got))
      throw RuntimeError(StrCat(target, " exists but its ", checksum.algorithm, " is ", got,
                                ", not the published ", checksum.Describe(),
                                "; delete it to download again"));
    std::printf("%s is present and verified (%s)\n", target.c_str(), checksum.Describe().c_str());
    return 0;
  }
  std::printf("downloading %s\n  -> %s\n", url.c_str(), target.c_str());
  Download(url, part);
  const uintmax_t size = fs::file_size(part);
  if (verified) {
    const std::string got = FileDigest(part, checksum.algorithm);
    if (!Matches(checksum, got)) {
      fs::remove(part);
      throw RuntimeError(StrCat("checksum mismatch for ", url, ": ", checksum.algorithm, " is ",
                                got, ", published ", checksum.Describe(), " (",
                                HumanBytes(static_cast<double>(size)), " received); the download ",
                                part, " was removed, run the command again to download afresh"));
    }
  } else {
    std::printf("warning: no published checksum; sha256 of the download: %s\n",
                FileDigest(part, "sha256").c_str());
  }
  fs::rename(part, target);
  std::printf("%s: %s%s\n", target.c_str(), HumanBytes(static_cast<double>(size)).c_str(),
              verified ? (", " + checksum.Describe() + " verified").c_str() : "");
  return 0;
}

int RunZoo(const std::vector<std::string>& args) {
  const std::string sub = args.empty() ? "" : args[0];
  if (sub == "list") {
    if (args.size() != 1) throw ConfigError("crema zoo list takes no arguments");
    return RunList();
  }
  if (sub == "info") return RunInfo(NameArgument(args, "info"));
  if (sub == "fetch") return RunFetch(NameArgument(args, "fetch"));
  throw ConfigError(StrCat(
      sub.empty() ? "crema zoo needs" : "unknown zoo command \"" + sub + "\": crema zoo needs",
      " list, info NAME or fetch NAME (crema zoo --help)"));
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(
    zoo, "zoo", "the model zoo: list models, show one, download its pretrained weights",
    "crema zoo list | info NAME | fetch NAME [--url-base URL] [--models-dir DIR] "
    "[--allow-unverified]\n\n"
    "list: every model under --models-dir (default models/) with its weights size, license and "
    "published accuracy. info NAME: the readme's front matter (weights URL, checksums, "
    "preprocessing, ...) and the model's files. fetch NAME: downloads the pretrained weights "
    "(http, https or file URLs) into models/NAME/ as FILE.part, resumes an interrupted "
    "download with a Range request, checks the published checksum and only then renames it "
    "to FILE. On a checksum mismatch the .part is deleted; after a network failure it is kept "
    "for the next run. Exit 1 when the download or the check fails.",
    {"models_dir", "url_base", "allow_unverified"}, &crema::cli::RunZoo);
