/**
 * Encodes a metadata filter for the `metadata` query parameter of
 * `GET /v2/sandboxes` exactly as the e2b SDK does, so that one server parser
 * serves both clients: every key and value is percent-encoded on its own,
 * the pairs are joined as a query string (`k=v&k2=v2`, which encodes the
 * inner percent signs once more), and the query serializer then encodes the
 * whole string as one parameter value.
 *
 * A server therefore decodes the parameter, parses the result as a query
 * string, and decodes each key and value once more. For
 * `{ 'user id': 'a&b=c' }` the wire carries
 * `metadata=user%252520id%3Da%252526b%25253Dc`.
 */
export function encodeMetadataFilter(metadata: Readonly<Record<string, string>>): string {
  return new URLSearchParams(
    Object.entries(metadata).map(([key, value]): [string, string] => [encodeURIComponent(key), encodeURIComponent(value)]),
  ).toString();
}
