// Who is signed in: the workspace the token is for, what it allows (the topics answer's
// "who"), and whether it is an admin's that holds every topic (the page then shows the
// admin panel and the audit tail).
export const session = { workspace: "", who: null, admin: false };
