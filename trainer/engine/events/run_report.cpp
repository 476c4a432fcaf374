#include "trainer/engine/events/run_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <stdexcept>

namespace mrcnn::engine {
namespace {

std::string Escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Base64(const std::string& bytes) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size())
      v |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size())
      v |= static_cast<uint8_t>(bytes[i + 2]);
    out += k[(v >> 18) & 63];
    out += k[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? k[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? k[v & 63] : '=';
  }
  return out;
}

const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};

ChartSeries SeriesOf(const EventStorage& storage, const std::string& name) {
  ChartSeries s{name, {}};
  if (storage.Has(name)) {
    for (const auto& [iteration, value] : storage.History(name).values()) {
      if (std::isfinite(value))
        s.points.emplace_back(static_cast<double>(iteration + 1), value);
    }
  }
  return s;
}

std::string CocoTable(const EventStorage& storage) {
  static const char* names[12] = {"AP",  "AP50", "AP75",  "APs", "APm", "APl",
                                  "AR1", "AR10", "AR100", "ARs", "ARm", "ARl"};
  std::map<std::string, const EvaluationEvent*> last;  // iou type -> newest evaluation
  for (const auto& e : storage.evaluations())
    last[e.iou_type] = &e;
  if (last.empty())
    return "<p>No evaluation ran (no val/test channel).</p>";
  std::string html = "<table><tr><th>iteration</th><th>type</th>";
  for (const char* n : names)
    html += fmt::format("<th>{}</th>", n);
  html += "</tr>";
  for (const auto& [type, e] : last) {
    html += fmt::format("<tr><td>{}</td><td>{}</td>", e->iteration, Escape(type));
    for (double v : e->stats)
      html += v < 0 ? "<td>&ndash;</td>" : fmt::format("<td>{:.3f}</td>", v);
    html += "</tr>";
  }
  html += "</table><h3>AP per category</h3><table><tr><th>category</th>";
  for (const auto& [type, e] : last)
    html += fmt::format("<th>{} AP</th>", Escape(type));
  html += "</tr>";
  const auto& first = *last.begin()->second;
  for (size_t i = 0; i < first.per_category.size(); ++i) {
    html += "<tr><td>" + Escape(first.per_category[i].first) + "</td>";
    for (const auto& [type, e] : last) {
      const double ap = i < e->per_category.size() ? e->per_category[i].second : -1;
      html += ap < 0 ? "<td>&ndash;</td>" : fmt::format("<td>{:.3f}</td>", ap);
    }
    html += "</tr>";
  }
  return html + "</table>";
}

std::string Curves(const EventStorage& storage) {
  std::vector<ChartSeries> losses;
  for (const auto& [name, history] : storage.scalars()) {
    if (name == "total_loss" || name.rfind("loss_", 0) == 0)
      losses.push_back(SeriesOf(storage, name));
  }
  std::string html = SvgLineChart("Training losses", losses, "iteration");
  html += SvgLineChart("Learning rate", {SeriesOf(storage, "lr")}, "iteration");
  std::map<std::string, ChartSeries> ap;
  for (const auto& e : storage.evaluations()) {
    for (const auto& [k, label] : {std::pair<int, const char*>{0, "AP"}, {1, "AP50"}}) {
      auto& s = ap[e.iou_type + "/" + label];
      s.name = e.iou_type + "/" + label;
      s.points.emplace_back(static_cast<double>(e.iteration), e.stats[static_cast<size_t>(k)]);
    }
  }
  std::vector<ChartSeries> ap_series;
  for (auto& [name, s] : ap)
    ap_series.push_back(std::move(s));
  if (!ap_series.empty())
    html += SvgLineChart("COCO AP at each evaluation", ap_series, "iteration");
  return html;
}

std::string Throughput(const EventStorage& storage, const RunReportInputs& in) {
  if (!storage.Has("time") || storage.History("time").empty())
    return "<p>No iteration ran in this process.</p>";
  const auto& t = storage.History("time");
  double total = 0;
  for (const auto& [it, v] : t.values())
    total += v;
  const double median = t.Median(t.values().size());
  return fmt::format(
      "<p>{} iterations of {} images on {} ({} process{}): median {:.3f} s per iteration, "
      "{:.2f} images/s; {:.1f} s of steps in this run.</p>",
      t.values().size(), in.images_per_iteration, Escape(in.device), in.processes,
      in.processes == 1 ? "" : "es", median, static_cast<double>(in.images_per_iteration) / median,
      total);
}

}  // namespace

std::string SvgLineChart(const std::string& title, const std::vector<ChartSeries>& series,
                         const std::string& x_label) {
  constexpr double W = 720, H = 300, L = 70, R = 170, T = 30, B = 40;
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const auto& s : series) {
    for (const auto& [x, y] : s.points) {
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  }
  std::string svg = fmt::format(
      "<figure><svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" "
      "height=\"{}\" "
      "role=\"img\" aria-label=\"{}\"><rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>"
      "<text x=\"{}\" y=\"18\" font-size=\"14\" font-weight=\"bold\">{}</text>",
      W, H, Escape(title), L, Escape(title));
  if (!std::isfinite(x0))
    return svg + fmt::format("<text x=\"{}\" y=\"{}\">no data</text></svg></figure>", L, H / 2);
  if (x1 == x0)
    x1 = x0 + 1;
  if (y1 == y0)
    y1 = y0 + (y0 == 0 ? 1 : std::abs(y0) * 0.1);
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };
  svg += fmt::format(
      "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#333\"/>"
      "<line x1=\"{0}\" y1=\"{3}\" x2=\"{0}\" y2=\"{1}\" stroke=\"#333\"/>"
      "<text x=\"{0}\" y=\"{4}\" font-size=\"11\">{5:g}</text>"
      "<text x=\"{2}\" y=\"{4}\" font-size=\"11\" text-anchor=\"end\">{6:g}</text>"
      "<text x=\"{7}\" y=\"{4}\" font-size=\"11\" text-anchor=\"middle\">{8}</text>"
      "<text x=\"{9}\" y=\"{1}\" font-size=\"11\" text-anchor=\"end\">{10:.4g}</text>"
      "<text x=\"{9}\" y=\"{11}\" font-size=\"11\" text-anchor=\"end\">{12:.4g}</text>",
      L, H - B, W - R, T, H - B + 16, x0, x1, (L + W - R) / 2, Escape(x_label), L - 4, y0, T + 4,
      y1);
  for (size_t i = 0; i < series.size(); ++i) {
    const char* colour = kColours[i % std::size(kColours)];
    std::string points;
    for (const auto& [x, y] : series[i].points)
      points += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
    if (series[i].points.size() == 1)
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>",
                         px(series[i].points[0].first), py(series[i].points[0].second), colour);
    else
      svg +=
          fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>",
                      colour, points);
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/>"
        "<text x=\"{}\" y=\"{}\" font-size=\"12\">{}</text>",
        W - R + 12, T + 16 * static_cast<double>(i), colour, W - R + 26,
        T + 9 + 16 * static_cast<double>(i), Escape(series[i].name));
  }
  return svg + "</svg></figure>";
}

std::string RenderRunReport(const EventStorage& storage, const RunReportInputs& in) {
  std::string html = fmt::format(
      "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{0}</title><style>"
      "body{{font-family:sans-serif;margin:24px;color:#222}}table{{border-collapse:collapse;margin:"
      "8px 0}}"
      "td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}th{{background:#f3f3f3}}"
      "figure{{display:inline-block;margin:6px}}.pictures "
      "img{{width:256px;image-rendering:pixelated;"
      "border:1px solid "
      "#ccc;margin:4px}}pre{{background:#f7f7f7;padding:8px;max-height:400px;overflow:auto}}"
      "</style></head><body><h1>{0}</h1>",
      Escape(in.title));
  html += "<h2>Throughput</h2>" + Throughput(storage, in);
  html += "<h2>Curves</h2>" + Curves(storage);
  html += "<h2>Final COCO evaluation</h2>" + CocoTable(storage);
  html += "<h2>Validation predictions</h2><div class=\"pictures\">";
  for (const auto& p : in.pictures) {
    html += fmt::format(
        "<figure><img alt=\"{0}\" title=\"{0}\" src=\"data:image/png;base64,{1}\">"
        "<figcaption>{0}</figcaption></figure>",
        Escape(p.tag), Base64(p.encoded_png));
  }
  if (in.pictures.empty())
    html += "<p>No validation pictures (no evaluation, or TENSORBOARD.EVAL_IMAGES 0).</p>";
  html += "</div><h2>Config</h2><pre>" + Escape(in.config_yaml) + "</pre></body></html>\n";
  return html;
}

void WriteRunReport(const std::filesystem::path& file, const EventStorage& storage,
                    const RunReportInputs& inputs) {
  std::filesystem::create_directories(file.parent_path());
  const auto tmp = file.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out << RenderRunReport(storage, inputs);
    if (!out)
      throw std::runtime_error("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, file);
}

}  // namespace mrcnn::engine
