// POSTs JSON bodies with the JDK's HttpClient as Java apps (LangChain4j, Spring AI) send them:
// HttpClient.newHttpClient() with its defaults, so HTTP/2 is preferred and every request on plain
// http offers the cleartext upgrade (Upgrade: h2c). Run as a single-file program:
//
//     java PostJson.java < requests
//
// stdin (UTF-8) holds one request a line, "URL JSON", sent in order on one client (a kept-alive
// connection per server); stdout gets a JSON array with one object per request: url, status, the
// HTTP version the answer came in, its Content-Type and its body as text.
// The body is a JSON string here (not parsed): the test reads it, so nothing is lost on the way.

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;

public class PostJson {
    public static void main(String[] args) throws Exception {
        String requests = new String(System.in.readAllBytes(), StandardCharsets.UTF_8);
        HttpClient client = HttpClient.newHttpClient();
        StringBuilder out = new StringBuilder("[");
        for (String line : requests.split("\n")) {
            if (line.isBlank()) {
                continue;
            }
            int space = line.indexOf(' ');
            String url = line.substring(0, space);
            HttpRequest request = HttpRequest.newBuilder(URI.create(url))
                    .header("Content-Type", "application/json")
                    .POST(HttpRequest.BodyPublishers.ofString(line.substring(space + 1)))
                    .build();
            HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
            if (out.length() > 1) {
                out.append(",");
            }
            out.append("{\"url\":").append(quoted(url))
                    .append(",\"status\":").append(response.statusCode())
                    .append(",\"version\":").append(quoted(response.version().name()))
                    .append(",\"content_type\":")
                    .append(quoted(response.headers().firstValue("content-type").orElse("")))
                    .append(",\"body\":").append(quoted(response.body())).append("}");
        }
        System.out.println(out.append("]"));
    }

    /** A JSON string of ASCII only, whatever the console's encoding. */
    static String quoted(String text) {
        StringBuilder quoted = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') {
                quoted.append('\\').append(c);
            } else if (c < 0x20 || c > 0x7e) {
                quoted.append(String.format("\\u%04x", (int) c));
            } else {
                quoted.append(c);
            }
        }
        return quoted.append('"').toString();
    }
}
