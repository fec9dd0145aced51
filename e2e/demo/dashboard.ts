/**
 * How the demo announces the service's dashboard: its address when `GET /dashboard/` on the metrics
 * port answers 200, otherwise what it answered. The demo serves metrics over plain HTTP
 * (`--metrics-secure=false`), so a browser needs no token; an address that does not answer is not
 * printed as if it did.
 */

/** The line to print after "dashboard". `link` decorates the address (an underline on a terminal). */
export async function dashboardLine(metricsPort: number, link: (url: string) => string = (url) => url): Promise<string> {
  const url = `http://127.0.0.1:${metricsPort}/dashboard/`;
  const status = await fetch(url, { signal: AbortSignal.timeout(5000) }).then(async (res) => {
    await res.body?.cancel();
    return res.status;
  }, () => undefined);
  return status === 200
    ? `${link(url)}  (open it in a browser; no token needed: the demo serves metrics over plain HTTP, --metrics-secure=false)`
    : `not served by this build of the service (GET ${url} answered ${status ?? 'nothing'})`;
}
