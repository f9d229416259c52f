// A small Iceberg REST catalog for icemv's tests: Iceberg's own server-side handlers
// (CatalogHandlers) over a JdbcCatalog, served by the JDK's com.sun.net.httpserver.
//
// It lives in package org.apache.iceberg.rest only to use the package-private
// RESTObjectMapper (the mapper with every REST request/response serializer registered).
// Compiled by the pytest fixture at test time; never commit the class files.
//
// Arguments: none. Settings come from the environment, so secrets never reach a command line:
//   ICEMV_REST_JDBC_URI    JDBC URL of the backing catalog database (required)
//   ICEMV_REST_JDBC_USER   its user (optional)
//   ICEMV_REST_WAREHOUSE   warehouse location (required)
//   ICEMV_REST_PREFIX      path prefix handed to clients in GET /v1/config (optional)
//   ICEMV_REST_TOKEN       bearer token every request must carry (optional: no auth)
//   ICEMV_REST_CREDENTIAL  client_id:client_secret accepted by POST /v1/oauth/tokens (optional)
// Listens on 127.0.0.1, an ephemeral port; prints "LISTENING <port>" once ready.
package org.apache.iceberg.rest;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import org.apache.iceberg.catalog.Namespace;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.exceptions.AlreadyExistsException;
import org.apache.iceberg.exceptions.CommitFailedException;
import org.apache.iceberg.exceptions.NamespaceNotEmptyException;
import org.apache.iceberg.exceptions.NoSuchNamespaceException;
import org.apache.iceberg.exceptions.NoSuchTableException;
import org.apache.iceberg.exceptions.NoSuchViewException;
import org.apache.iceberg.exceptions.NotAuthorizedException;
import org.apache.iceberg.exceptions.ValidationException;
import org.apache.iceberg.jdbc.JdbcCatalog;
import org.apache.iceberg.rest.requests.CreateNamespaceRequest;
import org.apache.iceberg.rest.requests.CreateTableRequest;
import org.apache.iceberg.rest.requests.CreateViewRequest;
import org.apache.iceberg.rest.requests.RegisterTableRequest;
import org.apache.iceberg.rest.requests.RenameTableRequest;
import org.apache.iceberg.rest.requests.UpdateNamespacePropertiesRequest;
import org.apache.iceberg.rest.requests.UpdateTableRequest;
import org.apache.iceberg.rest.responses.ConfigResponse;
import org.apache.iceberg.rest.responses.ErrorResponse;
import org.apache.iceberg.rest.responses.LoadTableResponse;
import org.apache.iceberg.rest.responses.LoadViewResponse;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.ObjectMapper;

public class IcemvRestServer {
  private static final ObjectMapper MAPPER = RESTObjectMapper.mapper();
  private static final List<Endpoint> ENDPOINTS =
      List.of(
          Endpoint.V1_LIST_NAMESPACES, Endpoint.V1_LOAD_NAMESPACE, Endpoint.V1_NAMESPACE_EXISTS,
          Endpoint.V1_CREATE_NAMESPACE, Endpoint.V1_UPDATE_NAMESPACE, Endpoint.V1_DELETE_NAMESPACE,
          Endpoint.V1_LIST_TABLES, Endpoint.V1_LOAD_TABLE, Endpoint.V1_TABLE_EXISTS,
          Endpoint.V1_CREATE_TABLE, Endpoint.V1_UPDATE_TABLE, Endpoint.V1_DELETE_TABLE,
          Endpoint.V1_RENAME_TABLE, Endpoint.V1_REGISTER_TABLE, Endpoint.V1_REPORT_METRICS,
          Endpoint.V1_LIST_VIEWS, Endpoint.V1_LOAD_VIEW, Endpoint.V1_VIEW_EXISTS,
          Endpoint.V1_CREATE_VIEW, Endpoint.V1_UPDATE_VIEW, Endpoint.V1_DELETE_VIEW,
          Endpoint.V1_RENAME_VIEW);

  private final JdbcCatalog catalog;
  private final String prefix;
  private final String token;
  private final String credential;

  /** A handler's answer: status, JSON body (null = none) and extra headers. */
  private record Reply(int status, Object body, Map<String, String> headers) {
    static Reply json(Object body) {
      return new Reply(200, body, Map.of());
    }

    static Reply empty() {
      return new Reply(204, null, Map.of());
    }
  }

  private IcemvRestServer(JdbcCatalog catalog, String prefix, String token, String credential) {
    this.catalog = catalog;
    this.prefix = prefix;
    this.token = token;
    this.credential = credential;
  }

  public static void main(String[] args) throws IOException {
    Map<String, String> env = System.getenv();
    Map<String, String> properties = new HashMap<>();
    properties.put("uri", require(env, "ICEMV_REST_JDBC_URI"));
    properties.put("warehouse", require(env, "ICEMV_REST_WAREHOUSE"));
    properties.put("jdbc.schema-version", "V1"); // views need the V1 schema
    if (env.get("ICEMV_REST_JDBC_USER") != null) {
      properties.put("jdbc.user", env.get("ICEMV_REST_JDBC_USER"));
    }
    // More catalog properties, one key=value per line (e.g. S3FileIO's, for an s3:// warehouse).
    for (String line : env.getOrDefault("ICEMV_REST_CATALOG_PROPERTIES", "").split("\n")) {
      int equals = line.indexOf('=');
      if (equals > 0) {
        properties.put(line.substring(0, equals), line.substring(equals + 1));
      }
    }
    JdbcCatalog catalog = new JdbcCatalog();
    catalog.setConf(new org.apache.hadoop.conf.Configuration());
    catalog.initialize("rest_backend", properties);
    IcemvRestServer server =
        new IcemvRestServer(
            catalog,
            env.getOrDefault("ICEMV_REST_PREFIX", ""),
            env.get("ICEMV_REST_TOKEN"),
            env.get("ICEMV_REST_CREDENTIAL"));
    HttpServer http = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 64);
    http.createContext("/", server::handle);
    http.setExecutor(Executors.newFixedThreadPool(8));
    http.start();
    System.out.println("LISTENING " + http.getAddress().getPort());
    System.out.flush();
  }

  private static String require(Map<String, String> env, String name) {
    String value = env.get(name);
    if (value == null || value.isEmpty()) {
      throw new IllegalArgumentException("missing environment variable " + name);
    }
    return value;
  }

  private void handle(HttpExchange exchange) throws IOException {
    Reply reply;
    try {
      reply = route(exchange);
    } catch (NoSuchNamespaceException | NoSuchTableException | NoSuchViewException e) {
      reply = error(404, e);
    } catch (AlreadyExistsException | CommitFailedException | NamespaceNotEmptyException e) {
      reply = error(409, e);
    } catch (NotAuthorizedException e) {
      reply = error(401, e);
    } catch (ValidationException | IllegalArgumentException e) {
      reply = error(400, e);
    } catch (RuntimeException | IOException | Error e) {
      e.printStackTrace();
      reply = error(500, e);
    }
    byte[] body =
        reply.body() == null ? new byte[0] : MAPPER.writeValueAsBytes(reply.body());
    exchange.getResponseHeaders().set("Content-Type", "application/json");
    reply.headers().forEach((key, value) -> exchange.getResponseHeaders().set(key, value));
    boolean noBody = body.length == 0 || "HEAD".equals(exchange.getRequestMethod());
    exchange.sendResponseHeaders(reply.status(), noBody ? -1 : body.length);
    if (!noBody) {
      try (OutputStream out = exchange.getResponseBody()) {
        out.write(body);
      }
    }
    exchange.close();
  }

  private static Reply error(int status, Throwable e) {
    ErrorResponse response =
        ErrorResponse.builder()
            .responseCode(status)
            .withType(e.getClass().getSimpleName())
            .withMessage(String.valueOf(e.getMessage()))
            .build();
    return new Reply(status, response, Map.of());
  }

  private Reply route(HttpExchange exchange) throws IOException {
    String method = exchange.getRequestMethod();
    String rawPath = exchange.getRequestURI().getRawPath();
    Map<String, String> query = form(exchange.getRequestURI().getRawQuery());
    List<String> parts = new ArrayList<>(Arrays.asList(rawPath.replaceAll("^/+|/+$", "").split("/")));
    if (parts.isEmpty() || !"v1".equals(parts.get(0))) {
      throw new NoSuchTableException("no route %s", rawPath);
    }
    parts.remove(0);
    if (parts.equals(List.of("oauth", "tokens")) && "POST".equals(method)) {
      return issueToken(body(exchange));
    }
    checkAuth(exchange);
    if (parts.equals(List.of("config"))) {
      ConfigResponse.Builder config = ConfigResponse.builder().withEndpoints(ENDPOINTS);
      if (!prefix.isEmpty()) {
        config.withOverride("prefix", prefix);
      }
      return Reply.json(config.build());
    }
    if (!prefix.isEmpty() && !parts.isEmpty() && prefix.equals(RESTUtil.decodeString(parts.get(0)))) {
      parts.remove(0);
    }
    int n = parts.size();
    String first = n > 0 ? parts.get(0) : "";
    if (n == 2 && first.equals("tables") && parts.get(1).equals("rename")) {
      CatalogHandlers.renameTable(catalog, read(exchange, RenameTableRequest.class));
      return Reply.empty();
    }
    if (n == 2 && first.equals("views") && parts.get(1).equals("rename")) {
      CatalogHandlers.renameView(catalog, read(exchange, RenameTableRequest.class));
      return Reply.empty();
    }
    if (!first.equals("namespaces")) {
      throw new NoSuchTableException("no route %s", rawPath);
    }
    if (n == 1) {
      if ("GET".equals(method)) {
        String parent = query.get("parent");
        Namespace ns = parent == null ? Namespace.empty() : RESTUtil.decodeNamespace(parent);
        return Reply.json(CatalogHandlers.listNamespaces(catalog, ns));
      }
      return Reply.json(
          CatalogHandlers.createNamespace(catalog, read(exchange, CreateNamespaceRequest.class)));
    }
    Namespace ns = RESTUtil.decodeNamespace(parts.get(1));
    if (n == 2) {
      switch (method) {
        case "HEAD":
          CatalogHandlers.namespaceExists(catalog, ns);
          return Reply.empty();
        case "DELETE":
          CatalogHandlers.dropNamespace(catalog, ns);
          return Reply.empty();
        default:
          return Reply.json(CatalogHandlers.loadNamespace(catalog, ns));
      }
    }
    String kind = parts.get(2);
    if (n == 3 && kind.equals("properties")) {
      return Reply.json(
          CatalogHandlers.updateNamespaceProperties(
              catalog, ns, read(exchange, UpdateNamespacePropertiesRequest.class)));
    }
    if (n == 3 && kind.equals("register")) {
      return Reply.json(
          CatalogHandlers.registerTable(catalog, ns, read(exchange, RegisterTableRequest.class)));
    }
    if (n == 3 && kind.equals("tables")) {
      if ("GET".equals(method)) {
        return Reply.json(CatalogHandlers.listTables(catalog, ns));
      }
      CreateTableRequest request = read(exchange, CreateTableRequest.class);
      return Reply.json(
          request.stageCreate()
              ? CatalogHandlers.stageTableCreate(catalog, ns, request)
              : CatalogHandlers.createTable(catalog, ns, request));
    }
    if (n == 3 && kind.equals("views")) {
      if ("GET".equals(method)) {
        return Reply.json(CatalogHandlers.listViews(catalog, ns));
      }
      return Reply.json(CatalogHandlers.createView(catalog, ns, read(exchange, CreateViewRequest.class)));
    }
    if (n == 5 && kind.equals("tables") && parts.get(4).equals("metrics")) {
      body(exchange); // accepted and dropped
      return Reply.empty();
    }
    if (n != 4) {
      throw new NoSuchTableException("no route %s", rawPath);
    }
    TableIdentifier id = TableIdentifier.of(ns, RESTUtil.decodeString(parts.get(3)));
    if (kind.equals("tables")) {
      switch (method) {
        case "HEAD":
          CatalogHandlers.tableExists(catalog, id);
          return Reply.empty();
        case "DELETE":
          if ("true".equals(query.get("purgeRequested"))) {
            CatalogHandlers.purgeTable(catalog, id);
          } else {
            CatalogHandlers.dropTable(catalog, id);
          }
          return Reply.empty();
        case "POST":
          return Reply.json(CatalogHandlers.updateTable(catalog, id, read(exchange, UpdateTableRequest.class)));
        default:
          return loadTable(exchange, id);
      }
    }
    if (kind.equals("views")) {
      switch (method) {
        case "HEAD":
          CatalogHandlers.viewExists(catalog, id);
          return Reply.empty();
        case "DELETE":
          CatalogHandlers.dropView(catalog, id);
          return Reply.empty();
        case "POST":
          return Reply.json(CatalogHandlers.updateView(catalog, id, read(exchange, UpdateTableRequest.class)));
        default:
          return loadView(exchange, id);
      }
    }
    throw new NoSuchTableException("no route %s", rawPath);
  }

  /** loadTable with the REST spec's ETag: a client that sends the current one gets 304. */
  private Reply loadTable(HttpExchange exchange, TableIdentifier id) {
    LoadTableResponse response = CatalogHandlers.loadTable(catalog, id);
    return conditional(exchange, response.metadataLocation(), response);
  }

  /**
   * loadView with an ETag as loadTable has (not in the REST spec yet, apache/iceberg#15946;
   * Gravitino serves it): a client that sends the current one gets 304.
   */
  private Reply loadView(HttpExchange exchange, TableIdentifier id) {
    LoadViewResponse response = CatalogHandlers.loadView(catalog, id);
    return conditional(exchange, response.metadataLocation(), response);
  }

  /** The answer with its ETag (of the metadata location), or a bodiless 304 if it matches. */
  private static Reply conditional(HttpExchange exchange, String metadataLocation, Object body) {
    String etag = "\"" + sha256(metadataLocation) + "\"";
    Map<String, String> headers = Map.of("ETag", etag);
    if (etag.equals(exchange.getRequestHeaders().getFirst("If-None-Match"))) {
      return new Reply(304, null, headers);
    }
    return new Reply(200, body, headers);
  }

  private void checkAuth(HttpExchange exchange) {
    if (token == null || token.isEmpty()) {
      return;
    }
    String header = exchange.getRequestHeaders().getFirst("Authorization");
    if (!("Bearer " + token).equals(header)) {
      throw new NotAuthorizedException("missing or wrong bearer token");
    }
  }

  /** OAuth2 client credentials (RFC 6749 4.4) as Iceberg's REST spec describes the endpoint. */
  private Reply issueToken(String form) throws IOException {
    Map<String, String> fields = form(form);
    String presented = fields.get("client_id") + ":" + fields.get("client_secret");
    if (!"client_credentials".equals(fields.get("grant_type"))
        || credential == null
        || !credential.equals(presented)) {
      Map<String, String> body = Map.of("error", "invalid_client");
      return new Reply(401, body, Map.of());
    }
    Map<String, Object> body = new HashMap<>();
    body.put("access_token", token);
    body.put("token_type", "bearer");
    body.put("issued_token_type", "urn:ietf:params:oauth:token-type:access_token");
    body.put("expires_in", 3600);
    return new Reply(200, body, Map.of());
  }

  private static Map<String, String> form(String encoded) {
    return encoded == null || encoded.isEmpty() ? Map.of() : RESTUtil.decodeFormData(encoded);
  }

  private static <T> T read(HttpExchange exchange, Class<T> type) throws IOException {
    return MAPPER.readValue(body(exchange), type);
  }

  private static String body(HttpExchange exchange) throws IOException {
    try (InputStream in = exchange.getRequestBody()) {
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
  }

  private static String sha256(String text) {
    try {
      MessageDigest digest = MessageDigest.getInstance("SHA-256");
      return HexFormat.of().formatHex(digest.digest(text.getBytes(StandardCharsets.UTF_8)));
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
