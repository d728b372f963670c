#include "tools/strata/plot.h"

#include <stdio.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <system_error>

#include "strata/base/errors.h"
#include "strata/base/file.h"

#ifdef STRATA_HAVE_PLPLOT
#include <plplot.h>
#endif

namespace strata::tools {

namespace {

// The bytes PLplot writes through a FILE* (fopencookie), and whether it closed it.
struct PlotSink {
  std::string bytes;
  bool closed = false;
  static ssize_t write(void* cookie, const char* data, size_t n) {
    static_cast<PlotSink*>(cookie)->bytes.append(data, n);
    return static_cast<ssize_t>(n);
  }
  static int close(void* cookie) {
    static_cast<PlotSink*>(cookie)->closed = true;
    return 0;
  }
};

std::string lower_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return ext;
}

#ifdef STRATA_HAVE_PLPLOT
// PLplot's device for a format: its own SVG driver (part of libplplot) and
// the cairo PNG driver (plplot-driver-cairo).
const char* device_for(const std::string& format) { return format == "svg" ? "svg" : "pngcairo"; }

bool device_installed(const char* device) {
  // plgDevs fills caller-provided arrays of at least the number of drivers.
  std::vector<const char*> menu_buf(256), name_buf(256);
  const char** menus = menu_buf.data();
  const char** names = name_buf.data();
  int n = static_cast<int>(name_buf.size());
  plgDevs(&menus, &names, &n);
  for (int i = 0; i < n; ++i) {
    if (names[i] != nullptr && std::string(names[i]) == device) return true;
  }
  return false;
}

struct Series {
  const char* key;
  const char* label;
  PLINT color;  // index into colour map 0 as set below
  PLINT style;  // 1 = solid (train), 2 = dashed (validation)
};

// One panel: x = epochs, the series present in `history`, a legend.
void draw_panel(const std::vector<int>& epochs,
                const std::map<std::string, std::vector<double>>& history, const char* title,
                PLINT legend_position, const std::vector<Series>& series) {
  std::vector<PLFLT> xs(epochs.begin(), epochs.end());
  for (PLFLT& x : xs) x += 1;  // Keras numbers epochs from 1 on screen
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  std::vector<const Series*> present;
  for (const Series& s : series) {
    auto it = history.find(s.key);
    if (it == history.end() || it->second.size() != epochs.size()) continue;
    present.push_back(&s);
    for (double v : it->second) {
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    }
  }
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  const double pad = std::max(1e-3, (hi - lo) * 0.08);
  const double x0 = xs.front(), x1 = xs.size() > 1 ? xs.back() : xs.front() + 1;
  pladv(0);
  plvpor(0.12, 0.95, 0.14, 0.88);
  plwind(x0 - 0.1, x1 + 0.1, lo - pad, hi + pad);
  plcol0(1);
  plbox("bcnst", epochs.size() > 12 ? 0.0 : 1.0, 0, "bcnstv", 0.0, 0);
  pllab("epoch", "", title);
  std::vector<PLINT> opts, colors, styles;
  std::vector<PLFLT> widths;
  std::vector<const char*> labels;
  for (const Series* s : present) {
    std::vector<PLFLT> ys(history.at(s->key).begin(), history.at(s->key).end());
    plcol0(s->color);
    pllsty(s->style);
    plwidth(2.0);
    plline(static_cast<PLINT>(xs.size()), xs.data(), ys.data());
    // Marks at each epoch, so a one-epoch run still shows its values.
    plpoin(static_cast<PLINT>(xs.size()), xs.data(), ys.data(), 17);
    opts.push_back(PL_LEGEND_LINE);
    colors.push_back(s->color);
    styles.push_back(s->style);
    widths.push_back(2.0);
    labels.push_back(s->label);
  }
  pllsty(1);
  plwidth(1.0);
  if (present.empty()) return;
  const auto n = static_cast<PLINT>(present.size());
  std::vector<PLINT> zeros(n, 0), text_colors(n, 1);
  std::vector<PLFLT> zerof(n, 0.0), ones(n, 1.0);
  std::vector<const char*> no_symbols(n, "");
  PLFLT legend_w = 0, legend_h = 0;
  pllegend(&legend_w, &legend_h, PL_LEGEND_BACKGROUND | PL_LEGEND_BOUNDING_BOX,
           PL_POSITION_INSIDE | legend_position, 0.02, 0.02, 0.1, 0, 1, 1, 0, 0, n, opts.data(),
           1.0, 1.0, 2.0, 0.0, text_colors.data(), labels.data(), zeros.data(), zeros.data(),
           zerof.data(), zerof.data(), colors.data(), styles.data(), widths.data(), zeros.data(),
           zerof.data(), zeros.data(), no_symbols.data());
}
#endif

}  // namespace

std::string plot_format(const std::string& path) {
  const std::string ext = lower_extension(path);
  STRATA_CHECK_ARG(ext == ".svg" || ext == ".png",
                   "--plot: expected a file ending in .png or .svg, got '", path, "'");
  return ext.substr(1);
}

void check_can_plot(const std::string& path) {
  const std::string format = plot_format(path);
#ifndef STRATA_HAVE_PLPLOT
  STRATA_CHECK(
      UNIMPLEMENTED, false, "--plot: this strata was built without PLplot; install libplplot-dev",
      format == "png" ? " and plplot-driver-cairo" : "", " (scripts/setup.sh does) and rebuild");
#else
  STRATA_CHECK(UNIMPLEMENTED, device_installed(device_for(format)), "--plot: PLplot's ",
               device_for(format), " driver is not installed; install ",
               format == "png" ? "plplot-driver-cairo" : "libplplot17",
               " (scripts/setup.sh does) or write .", format == "png" ? "svg" : "png");
#endif
  const std::filesystem::path target = std::filesystem::absolute(path);
  STRATA_CHECK(NOT_FOUND, std::filesystem::is_directory(target.parent_path()), "--plot: folder ",
               target.parent_path().string(), " does not exist (for '", path, "')");
}

void plot_training_curves(const std::vector<int>& epochs,
                          const std::map<std::string, std::vector<double>>& history,
                          const std::string& path) {
  check_can_plot(path);
  STRATA_CHECK_ARG(!epochs.empty(),
                   "--plot: no epochs were trained in this run, nothing to plot to '", path, "'");
#ifndef STRATA_HAVE_PLPLOT
  (void)history;
#else
  const std::string format = plot_format(path);
  // PLplot draws into memory, and the atomic writer then writes the bytes and
  // moves the file into place whole: a reader never sees a half-drawn file, and
  // a failing write (a full disk) is an error naming its errno, which PLplot's
  // own unchecked stdio writes would lose.
  PlotSink sink;
  FILE* stream = ::fopencookie(
      &sink, "w",
      cookie_io_functions_t{
          .read = nullptr, .write = &PlotSink::write, .seek = nullptr, .close = &PlotSink::close});
  STRATA_CHECK(RESOURCE_EXHAUSTED, stream != nullptr, "--plot: cannot open a memory stream");
  plsdev(device_for(format));
  plsfile(stream);
  plspage(0, 0, 1100, 450, 0, 0);
  // White background, dark axes; then the series colours (train blue, validation orange).
  plscolbg(255, 255, 255);
  plscol0(1, 30, 30, 30);
  plscol0(2, 31, 119, 180);
  plscol0(3, 255, 127, 14);
  plssub(2, 1);
  plinit();
  // Legends where the curves usually are not: loss falls, accuracy rises.
  draw_panel(epochs, history, "loss", PL_POSITION_TOP | PL_POSITION_RIGHT,
             {{"loss", "train", 2, 1}, {"val_loss", "validation", 3, 2}});
  draw_panel(epochs, history, "accuracy", PL_POSITION_BOTTOM | PL_POSITION_RIGHT,
             {{"accuracy", "train", 2, 1}, {"val_accuracy", "validation", 3, 2}});
  plend();
  if (!sink.closed) std::fclose(stream);  // plend closes the drivers' files itself
  STRATA_CHECK(INTERNAL, !sink.bytes.empty(), "--plot: PLplot drew nothing for '", path, "'");
  AtomicFileWriter file(std::filesystem::absolute(path).string());
  file.append(sink.bytes);
  file.commit();
#endif
}

}  // namespace strata::tools
