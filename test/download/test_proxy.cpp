// Proxy choice and NO_PROXY matching as curl and urllib do it; http(s) URL parsing and
// redirects.
#include <catch2/catch.hpp>

#include "download/proxy.h"

namespace mrcnn::download {

TEST_CASE("URLs parse into where to connect and what to ask for", "[download]") {
  const Url a = ParseUrl("https://Dl.Example.com/x/y.pkl?a=1#frag");
  CHECK(a.tls);
  CHECK(a.host == "dl.example.com");
  CHECK(a.port == 443);
  CHECK(a.target == "/x/y.pkl?a=1");
  CHECK(a.ToString() == "https://dl.example.com/x/y.pkl?a=1");
  const Url b = ParseUrl("http://user:pw@[::1]:8080");
  CHECK(b.host == "::1");
  CHECK(b.port == 8080);
  CHECK(b.target == "/");
  CHECK(b.userinfo == "user:pw");
  CHECK(b.HostHeader() == "[::1]:8080");
  CHECK(ParseUrl("http://h:80/").HostHeader() == "h");
  CHECK_THROWS_AS(ParseUrl("ftp://h/x"), std::invalid_argument);
  CHECK_THROWS_AS(ParseUrl("https:///x"), std::invalid_argument);
  CHECK_THROWS_AS(ParseUrl("https://h:0/x"), std::invalid_argument);
  CHECK_THROWS_AS(ParseUrl("https://h:70000/x"), std::invalid_argument);
  CHECK_THROWS_AS(ParseUrl("https://h:8a/x"), std::invalid_argument);
}

TEST_CASE("redirects lead to absolute, scheme-relative and relative locations", "[download]") {
  const Url base = ParseUrl("https://a.example/dir/file.pkl?q=1");
  CHECK(ResolveRedirect(base, "http://b.example:81/x").ToString() == "http://b.example:81/x");
  CHECK(ResolveRedirect(base, "//c.example/y").ToString() == "https://c.example/y");
  CHECK(ResolveRedirect(base, "/z?sig=2").ToString() == "https://a.example/z?sig=2");
  CHECK(ResolveRedirect(base, "other.pkl").ToString() == "https://a.example/dir/other.pkl");
}

TEST_CASE("the proxy follows the URL's scheme, lower-case names first", "[download]") {
  const Url https = ParseUrl("https://dl.example.com/f");
  const Url http = ParseUrl("http://dl.example.com/f");
  CHECK_FALSE(ProxyFor(https, {}).has_value());
  CHECK(ProxyFor(https, {{"HTTPS_PROXY", "http://p:3128"}})->HostHeader() == "p:3128");
  CHECK(ProxyFor(https, {{"HTTPS_PROXY", "http://P:1"}, {"https_proxy", "q:2"}})->HostHeader() ==
        "q:2");
  CHECK_FALSE(ProxyFor(https, {{"HTTP_PROXY", "http://p:3128"}}).has_value());
  CHECK(ProxyFor(http, {{"HTTP_PROXY", "http://u:s@p:3128"}})->userinfo == "u:s");
  CHECK(ProxyFor(http, {{"http_proxy", ""}, {"HTTP_PROXY", "p:1"}})->HostHeader() == "p:1");
  CHECK_FALSE(ProxyFor(http, {{"HTTPS_PROXY", "http://p:3128"}}).has_value());
  CHECK_THROWS_WITH(ProxyFor(https, {{"HTTPS_PROXY", "https://p:3128"}}),
                    Catch::Contains("HTTPS_PROXY") && Catch::Contains("CONNECT"));
  CHECK(ProxyFor(https, {{"HTTPS_PROXY", "p:3128"}, {"NO_PROXY", "example.com"}}) == std::nullopt);
  CHECK(ProxyFor(https,
                 {{"HTTPS_PROXY", "p:3128"}, {"no_proxy", "other"}, {"NO_PROXY", "example.com"}})
            .has_value());  // no_proxy wins over NO_PROXY
}

TEST_CASE("NO_PROXY entries exempt hosts, domains, ports, addresses and blocks", "[download]") {
  CHECK(NoProxyExempts("*", "anything", 443));
  CHECK(NoProxyExempts("example.com", "example.com", 443));
  CHECK(NoProxyExempts("example.com", "dl.example.com", 443));
  CHECK(NoProxyExempts(".example.com", "dl.example.com", 443));
  CHECK(NoProxyExempts(".example.com", "example.com", 443));
  CHECK_FALSE(NoProxyExempts("example.com", "badexample.com", 443));
  CHECK_FALSE(NoProxyExempts("dl.example.com", "example.com", 443));
  CHECK(NoProxyExempts("a, b ,Example.COM", "dl.example.com", 443));
  CHECK(NoProxyExempts("example.com:8443", "example.com", 8443));
  CHECK_FALSE(NoProxyExempts("example.com:8443", "example.com", 443));
  CHECK(NoProxyExempts("127.0.0.1", "127.0.0.1", 80));
  CHECK_FALSE(NoProxyExempts("127.0.0.1", "127.0.0.2", 80));
  CHECK(NoProxyExempts("10.0.0.0/8", "10.20.30.40", 80));
  CHECK_FALSE(NoProxyExempts("10.0.0.0/8", "11.0.0.1", 80));
  CHECK(NoProxyExempts("169.254.169.254/32", "169.254.169.254", 80));
  CHECK_FALSE(NoProxyExempts("10.0.0.0/8", "ten.example", 80));
  CHECK(NoProxyExempts("::1", "::1", 80));
  CHECK(NoProxyExempts("[::1]:8080", "::1", 8080));
  CHECK_FALSE(NoProxyExempts("[::1]:8080", "::1", 80));
  CHECK_FALSE(NoProxyExempts("", "example.com", 443));
  CHECK_FALSE(NoProxyExempts(",,", "example.com", 443));
}

}  // namespace mrcnn::download
