// The API reference at /docs: Swagger UI from the fastapi-offline package's files, served by the desk itself (no CDN),
// started from this file so the page needs no inline script under the desk's content security policy.
window.addEventListener("DOMContentLoaded", function () {
  window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui", deepLinking: true });
});
