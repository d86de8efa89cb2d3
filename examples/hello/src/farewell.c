const char *farewell(void) { return "goodbye"; }
