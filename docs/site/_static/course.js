// The course's website: small fixes to the theme, run on every page.
document.addEventListener("DOMContentLoaded", function () {
  // Both themes bind the sidebar toggle to the first ".primary-toggle" of the page, a button of the top bar that the
  // Book theme hides; the one a reader sees is another. Its click is passed on: the sidebar folds on a wide screen,
  // and opens as a panel on a phone.
  var toggles = document.querySelectorAll(".primary-toggle");
  for (var i = 1; i < toggles.length; i++) {
    toggles[i].addEventListener("click", function (event) {
      event.preventDefault();
      event.stopPropagation();
      toggles[0].click();
    });
  }
});
// Opened from a folder (file://), the search page cannot fetch the other pages for the snippets under each result
// (the browser refuses, and says so in the console): it shows the titles only, which it can.
if (location.protocol === "file:" && typeof DOCUMENTATION_OPTIONS !== "undefined") {
  DOCUMENTATION_OPTIONS.SHOW_SEARCH_SUMMARY = false;
}
